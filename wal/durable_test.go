package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/internal/faultfs"
)

// TestCompactWritesThroughFS: a compaction's manifest goes through
// Options.FS (the one durable-write seam): a rename that fails there
// fails the compaction with nothing removed and no temporary file left,
// and the retry through the same FS writes the manifest.
func TestCompactWritesThroughFS(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	var seen atomic.Int32
	fsys := faultfs.New(func(stage, path string) error {
		if filepath.Base(path) == manifestName {
			seen.Add(1)
			if full.Load() && stage == faultfs.StageRename {
				return syscall.ENOSPC
			}
		}
		return nil
	})
	l, _ := compactLog(t, 60, Options{FS: fsys})
	defer l.Close()
	dir := l.Dir()
	res, err := l.Compact(context.Background(), CompactOptions{Before: 25})
	if !errors.Is(err, syscall.ENOSPC) || res.NewFirstSeq != 1 || l.FirstSeq() != 1 {
		t.Fatalf("Compact with a failing rename: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, manifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a manifest was written: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	full.Store(false)
	res, err = l.Compact(context.Background(), CompactOptions{Before: 25})
	if err != nil || res.NewFirstSeq <= 1 {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	if _, err := ReadManifest(dir); err != nil {
		t.Fatal(err)
	}
	// write and rename of the failed try; write, rename, dir-sync of the retry.
	if n := seen.Load(); n != 5 {
		t.Fatalf("the FS saw %d stages of the manifest's writes, want 5", n)
	}
}

package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLockSymlinkNeverFollowed (issue 27 damage matrix): wal/LOCK replaced
// by a symlink to a segment made every command that takes the lock write
// its pid over the segment's first bytes and cut it to a few bytes. The
// lock file is opened without following links: the open fails with ELOOP
// (the CLI names the fix) and the segment keeps every byte.
func TestLockSymlinkNeverFollowed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir})
	appendN(t, l, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "0*"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	seg := segs[len(segs)-1]
	orig, _ := os.ReadFile(seg)
	os.Remove(filepath.Join(dir, lockName))
	if err := os.Symlink(seg, filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	if !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("open with LOCK a symlink: %v, want an error wrapping ELOOP", err)
	}
	if got, _ := os.ReadFile(seg); !bytes.Equal(got, orig) {
		t.Fatalf("the segment behind the LOCK symlink changed: %d bytes, want %d", len(got), len(orig))
	}
}

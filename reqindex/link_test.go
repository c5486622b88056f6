package reqindex_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestLinkedIndexNeverWrittenThrough: state/reqindex.db replaced by a link
// to a copy elsewhere was opened through the link and written by bbolt
// (the damage matrix's reqindex/symlink-elsewhere). The link is replaced
// by a rebuilt index; its target keeps every byte.
func TestLinkedIndexNeverWrittenThrough(t *testing.T) {
	h, want := buildIndexed(t, 200)
	path := h.RequestIndexFile()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "reqindex.db")
	if err := os.WriteFile(elsewhere, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := os.Symlink(elsewhere, path); err != nil {
		t.Fatal(err)
	}
	e := openEngine(t, h)
	x, err := e.RequestIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if x.Rebuilt() == "" {
		t.Error("an index behind a link was trusted")
	}
	checkAnswers(t, x, want)
	if _, err := e.Append(context.Background(), reqEvent(t, "after-link")); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(elsewhere); !bytes.Equal(got, orig) {
		t.Fatalf("the link's target was written through (%d bytes, want %d unchanged)", len(got), len(orig))
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("state/reqindex.db is not a regular file again: %v %v", fi, err)
	}
}

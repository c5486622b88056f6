package home

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// ReadMapped hands read the file's exact bytes whether it maps the file
// (over mapOver) or reads it, an empty file included, and returns the
// open error as os.Open does.
func TestReadMapped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, over := range []int64{0, int64(len(want)) - 1, int64(len(want)), 1 << 30} {
		var got []byte
		if err := ReadMapped(path, over, func(b []byte) { got = bytes.Clone(b) }); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("mapOver %d: %d bytes, %v", over, len(got), err)
		}
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	called := false
	if err := ReadMapped(path, 0, func(b []byte) { called = len(b) == 0 }); err != nil || !called {
		t.Fatalf("empty file: called %v, %v", called, err)
	}
	if err := ReadMapped(filepath.Join(dir, "missing"), 0, func([]byte) { t.Fatal("read called") }); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

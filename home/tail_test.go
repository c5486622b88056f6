package home

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReadTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n    int64
		want string
	}{{0, ""}, {3, "789"}, {10, "0123456789"}, {64, "0123456789"}} {
		b, size, err := ReadTail(path, c.n)
		if err != nil || string(b) != c.want || size != 10 {
			t.Errorf("ReadTail(%d) = %q, %d, %v; want %q, 10", c.n, b, size, err, c.want)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, size, err := ReadTail(empty, 5); err != nil || len(b) != 0 || size != 0 {
		t.Errorf("empty file: %q, %d, %v", b, size, err)
	}
	if _, _, err := ReadTail(filepath.Join(dir, "missing"), 5); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}

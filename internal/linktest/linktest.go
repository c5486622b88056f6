// Package linktest plants a symlink where a file of a home belongs, for
// the tests that check nothing is written through one (docs/spec.md,
// section 2): the link's target lies outside the home and must keep
// every byte.
package linktest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Victim is the file a planted link points to.
type Victim struct {
	Path  string // outside the home
	Bytes []byte // what it held when the link was planted
}

// Plant writes content to a new file outside the home and puts a link to
// it at path (removing what was there).
func Plant(t testing.TB, path string, content []byte) Victim {
	t.Helper()
	v := Victim{Path: filepath.Join(t.TempDir(), filepath.Base(path)), Bytes: content}
	if err := os.WriteFile(v.Path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.Symlink(v.Path, path); err != nil {
		t.Fatal(err)
	}
	return v
}

// MoveAway puts a copy of path's bytes outside the home and a link to the
// copy in path's place.
func MoveAway(t testing.TB, path string) Victim {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Plant(t, path, b)
}

// Unchanged fails t unless the victim still holds exactly its bytes.
func (v Victim) Unchanged(t testing.TB) {
	t.Helper()
	got, err := os.ReadFile(v.Path)
	if err != nil {
		t.Fatalf("the link's target: %v", err)
	}
	if !bytes.Equal(got, v.Bytes) {
		t.Fatalf("the link's target was written through: %d bytes (%.40q…), want its %d unchanged", len(got), got, len(v.Bytes))
	}
}

// Regular fails t unless path is a regular file (the link replaced).
func Regular(t testing.TB, path string) {
	t.Helper()
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s is not a regular file: %v %v", path, fi, err)
	}
}

// StillLink fails t unless path is still a link (refused, not replaced).
func StillLink(t testing.TB, path string) {
	t.Helper()
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is no longer the link: %v %v", path, fi, err)
	}
}

// Holds fails t unless path is a regular file (the link replaced) holding
// exactly want.
func Holds(t testing.TB, path string, want []byte) {
	t.Helper()
	Regular(t, path)
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, %v; want %q", path, got, err, want)
	}
}

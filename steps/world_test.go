package steps

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWorldHash(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(paths ...string) string {
		t.Helper()
		s, err := WorldHash(dir, paths)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	missing := hash("a.txt")
	want := HashBytes([]byte("\"a.txt\" missing 0 -\n"))
	if missing != want {
		t.Fatalf("missing = %s, want %s", missing, want)
	}
	write("a.txt", "hello\n")
	one := hash("a.txt")
	wantListing := "\"a.txt\" file 6 " + HashBytes([]byte("hello\n")) + "\n"
	if one != HashBytes([]byte(wantListing)) {
		t.Fatalf("file hash %s, want hash of %q", one, wantListing)
	}
	if hash("./a.txt") != one || hash(filepath.Join(dir, "a.txt")) == "" {
		t.Fatal("cleaned names must hash alike")
	}
	write("a.txt", "hellO\n")
	if hash("a.txt") == one {
		t.Fatal("content change not seen")
	}
	// Directories are listed recursively, in name order.
	write("d/x", "1")
	write("d/sub/y", "22")
	listing := "\"d\" dir 0 -\n\"d/sub\" dir 0 -\n\"d/sub/y\" file 2 " + HashBytes([]byte("22")) + "\n\"d/x\" file 1 " + HashBytes([]byte("1")) + "\n"
	if got := hash("d"); got != HashBytes([]byte(listing)) {
		t.Fatalf("dir hash %s, want hash of\n%s", got, listing)
	}
	// Symlinks are listed by their target text and never followed, so a
	// file outside the roots cannot change the hash.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "secret")
	if err := os.Symlink(target, filepath.Join(dir, "d", "link")); err != nil {
		t.Fatal(err)
	}
	withLink := hash("d")
	if err := os.WriteFile(target, []byte("v2 changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if hash("d") != withLink {
		t.Fatal("symlink was followed out of the world")
	}
	// Order of the listed paths does not matter; an empty world hashes the empty listing.
	if hash("a.txt", "d") != hash("d", "a.txt") {
		t.Fatal("path order changed the hash")
	}
	if hash() != HashBytes(nil) {
		t.Fatal("empty world")
	}
	// A path below a regular file is missing, not an error.
	if _, err := WorldHash(dir, []string{"a.txt/below"}); err != nil {
		t.Fatal(err)
	}
}

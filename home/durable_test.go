package home

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/internal/linktest"
)

// failFS is OSFS with one step failing (the seam's use in a fault test).
type failFS struct {
	OSFS
	step string
}

var errInjected = errors.New("injected")

func (f failFS) CreateTemp(dir, pattern string) (File, error) {
	if f.step == "create" {
		return nil, errInjected
	}
	t, err := f.OSFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return failFile{t, f.step}, nil
}

func (f failFS) Rename(o, n string) error {
	if f.step == "rename" {
		return errInjected
	}
	return f.OSFS.Rename(o, n)
}

func (f failFS) SyncDir(dir string) error {
	if f.step == "syncdir" {
		return errInjected
	}
	return f.OSFS.SyncDir(dir)
}

type failFile struct {
	File
	step string
}

func (f failFile) Write(p []byte) (int, error) {
	if f.step == "write" {
		n, _ := f.File.Write(p[:len(p)/2]) // a torn write
		return n, errInjected
	}
	return f.File.Write(p)
}

func (f failFile) Sync() error {
	if f.step == "sync" {
		return errInjected
	}
	return f.File.Sync()
}

// TestWriteDurableFaults: a failure at any step before the rename leaves
// the old file byte for byte and no temporary file; a failed fsync of the
// directory is reported with the new file in place; without a fault the
// new file is whole, of its mode, and alone in the directory.
func TestWriteDurableFaults(t *testing.T) {
	for _, tc := range []struct {
		step    string
		wantNew bool
	}{{"create", false}, {"write", false}, {"sync", false}, {"rename", false}, {"syncdir", true}, {"", true}} {
		dir := t.TempDir()
		path := filepath.Join(dir, "f.json")
		if err := os.WriteFile(path, []byte("old contents\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := WriteDurable(path, WriteOptions{FS: failFS{step: tc.step}, Perm: 0o640}, Bytes([]byte("the new contents\n")))
		if tc.step == "" {
			if err != nil {
				t.Fatalf("no fault: %v", err)
			}
		} else if !errors.Is(err, errInjected) {
			t.Fatalf("%s: err %v, want the injected one", tc.step, err)
		}
		got, _ := os.ReadFile(path)
		want := "old contents\n"
		if tc.wantNew {
			want = "the new contents\n"
		}
		if string(got) != want {
			t.Fatalf("%s: file holds %q, want %q", tc.step, got, want)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Fatalf("%s: %d entries left in the directory, want the file alone", tc.step, len(ents))
		}
		if fi, _ := os.Stat(path); tc.wantNew && fi.Mode().Perm() != 0o640 {
			t.Fatalf("%s: mode %v", tc.step, fi.Mode())
		}
	}
}

// pathFS records the file each write was bound to (PathFS).
type pathFS struct {
	OSFS
	bound *[]string
}

func (p pathFS) ForPath(path string) FS {
	*p.bound = append(*p.bound, path)
	return failFS{step: "rename"}
}

// TestWriteDurableTempNameAndPathFS: a fixed temporary name (TempName)
// overwrites the leftover of an interrupted write rather than leaving a
// second file; a PathFS is asked for the FS of each write by the file it
// replaces, and that FS is the one used (here failing the rename).
func TestWriteDurableTempNameAndPathFS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "MANIFEST")
	if err := os.WriteFile(filepath.Join(dir, ".MANIFEST.tmp"), []byte("a torn leftover that is longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteDurable(path, WriteOptions{TempName: ".MANIFEST.tmp"}, Bytes([]byte("new\n"))); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if got, _ := os.ReadFile(path); string(got) != "new\n" || len(ents) != 1 {
		t.Fatalf("file %q, %d entries (want the file alone)", got, len(ents))
	}
	var bound []string
	err := WriteDurable(path, WriteOptions{FS: pathFS{bound: &bound}, TempName: ".MANIFEST.tmp"}, Bytes([]byte("newer\n")))
	if !errors.Is(err, errInjected) || len(bound) != 1 || bound[0] != path {
		t.Fatalf("err %v, bound to %v", err, bound)
	}
	if got, _ := os.ReadFile(path); string(got) != "new\n" {
		t.Fatalf("file %q after a failed rename", got)
	}
}

// TestInstall: Install renames a finished temporary file over path; a
// failed directory fsync is a *DirSyncError with the new file in place,
// a failed rename removes the temporary file and keeps the old one.
func TestInstall(t *testing.T) {
	dir := t.TempDir()
	path, tmp := filepath.Join(dir, "db"), filepath.Join(dir, "db.rebuild")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(path, "old")
	write(tmp, "rebuilt")
	err := Install(failFS{step: "syncdir"}, tmp, path, false)
	var ds *DirSyncError
	if !errors.As(err, &ds) || ds.Dir != dir || !errors.Is(err, errInjected) {
		t.Fatalf("err %v, want a DirSyncError of %s", err, dir)
	}
	if got, _ := os.ReadFile(path); string(got) != "rebuilt" {
		t.Fatalf("file %q", got)
	}
	write(tmp, "again")
	if err := Install(failFS{step: "rename"}, tmp, path, false); !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "rebuilt" {
		t.Fatalf("file %q after a failed rename", got)
	}
	write(tmp, "third")
	if err := Install(nil, tmp, path, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "third" {
		t.Fatalf("file %q", got)
	}
}

// TestWriteNew: a taken name is never replaced; the next free one of
// names is used; names giving up returns the last error; the file holds
// the bytes with FilePerm.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cut"), []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	names := func(i int) string {
		switch {
		case i == 0:
			return "cut"
		case i > 1:
			return ""
		}
		return "cut.1"
	}
	n, err := WriteNew(dir, names, []byte("second"), false)
	if err != nil || n != "cut.1" {
		t.Fatalf("%q %v", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cut")); string(b) != "first" {
		t.Fatalf("taken file replaced: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cut.1")); string(b) != "second" {
		t.Fatalf("new file %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "cut.1")); fi.Mode().Perm() != FilePerm {
		t.Fatalf("mode %v", fi.Mode())
	}
	if n, err := WriteNew(dir, names, []byte("third"), true); !errors.Is(err, os.ErrExist) || n != "" {
		t.Fatalf("every name taken: %q %v", n, err)
	}
}

// TestWriteDurableTempNameNeverALink: a link left at a fixed temporary
// name had its target truncated and written, then was renamed into place
// as the file itself. The link is removed (its target keeps its bytes)
// and the file written is a regular file.
func TestWriteDurableTempNameNeverALink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "MANIFEST")
	v := linktest.Plant(t, filepath.Join(dir, ".MANIFEST.tmp"), []byte("precious bytes\n"))
	if err := WriteDurable(path, WriteOptions{TempName: ".MANIFEST.tmp"}, Bytes([]byte("new\n"))); err != nil {
		t.Fatal(err)
	}
	v.Unchanged(t)
	linktest.Holds(t, path, []byte("new\n"))
}

package home

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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

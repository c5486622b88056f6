package home

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// FS is the file-system seam of durable writes (WriteDurable): the real
// one is OSFS; a fault test wraps it to fail any step — the write, the
// fsync, the rename, the directory's fsync — and checks what a reader then
// finds (the idea of pebble's vfs/errorfs, kept to what these writes use).
type FS interface {
	CreateTemp(dir, pattern string) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	SyncDir(dir string) error
}

// File is the temporary file of a durable write.
type File interface {
	io.Writer
	Name() string
	Chmod(mode os.FileMode) error
	Sync() error
	Close() error
}

// OSFS is the operating system's file system.
type OSFS struct{}

// CreateTemp is os.CreateTemp.
func (OSFS) CreateTemp(dir, pattern string) (File, error) { return os.CreateTemp(dir, pattern) }

// Rename is os.Rename.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove is os.Remove.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// SyncDir fsyncs directory dir.
func (OSFS) SyncDir(dir string) error { return SyncDir(dir) }

// WriteOptions configure WriteDurable; zero values take the defaults.
type WriteOptions struct {
	FS   FS          // default OSFS{}
	Perm os.FileMode // of the file; default FilePerm
	// TempPattern names the temporary file beside path (os.CreateTemp's
	// pattern); default "." + base + ".tmp*". Whoever cleans up after a
	// crash globs for it.
	TempPattern string
	// NoSync skips both fsyncs (a log opened with NoSync, tests): the
	// file is still replaced whole, by rename.
	NoSync bool
}

// WriteDurable replaces path with what fill writes, as one durable step:
// a temporary file beside it, fill, fsync, close, rename over path, fsync
// of the directory. Until the rename, path is untouched and a failure
// removes the temporary file; a reader sees the old file or the new one,
// never a mix. A failed fsync of the directory is returned (wrapped,
// naming it) with the new file in place but its rename perhaps not yet
// durable. The directory must exist.
func WriteDurable(path string, o WriteOptions, fill func(w io.Writer) error) error {
	fsys := o.FS
	if fsys == nil {
		fsys = OSFS{}
	}
	if o.Perm == 0 {
		o.Perm = FilePerm
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	if o.TempPattern == "" {
		o.TempPattern = "." + base + ".tmp*"
	}
	f, err := fsys.CreateTemp(dir, o.TempPattern)
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(o.Perm)
	if err == nil {
		err = fill(f)
	}
	if err == nil && !o.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		fsys.Remove(tmp) // path stays as it was
		return err
	}
	if o.NoSync {
		return nil
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// Bytes is WriteDurable's fill that writes b.
func Bytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

package home

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// FS is the file-system seam of durable writes (WriteDurable, Install):
// the real one is OSFS; a fault test wraps it to fail any step — the
// write, the fsync, the rename, the directory's fsync — and checks what a
// reader then finds (the idea of pebble's vfs/errorfs, kept to what these
// writes use). It is passed by value to whoever writes (engine.Options.FS,
// wal.Options.FS, snapshot.Writer): there is no package-level hook.
type FS interface {
	CreateTemp(dir, pattern string) (File, error)
	// Create creates or truncates name (a temporary file of a fixed
	// name, WriteOptions.TempName).
	Create(name string, perm os.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	SyncDir(dir string) error
}

// PathFS is an FS that wants to know which file a write is for (a fault
// test that fails the writes of one file only): WriteDurable and Install
// call ForPath with the file they replace and use the FS it returns for
// that write.
type PathFS interface {
	FS
	ForPath(path string) FS
}

// forPath is fsys bound to path when it asks to be (PathFS), OSFS when nil.
func forPath(fsys FS, path string) FS {
	if fsys == nil {
		return OSFS{}
	}
	if p, ok := fsys.(PathFS); ok {
		return p.ForPath(path)
	}
	return fsys
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

// Create is os.OpenFile(name, O_WRONLY|O_CREATE|O_TRUNC, perm), but never
// through a link (OpenOwn): a link left at a fixed temporary name would
// have its target truncated and written, then renamed into place.
func (OSFS) Create(name string, perm os.FileMode) (File, error) {
	return OpenOwn(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
}

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
	// TempName, when set, is the temporary file's fixed name beside path
	// (created or truncated), for a writer that holds a lock so that no
	// two of its writes race: the leftover of a crash is then overwritten
	// by the next write rather than left beside it. It overrides
	// TempPattern.
	TempName string
	// NoSync skips both fsyncs (a log opened with NoSync, tests): the
	// file is still replaced whole, by rename.
	NoSync bool
	// NoDirSync skips the fsync of the directory only: the caller does it
	// once after several writes into it (the log's archived segments).
	NoDirSync bool
}

// WriteDurable replaces path with what fill writes, as one durable step:
// a temporary file beside it, fill, fsync, close, rename over path, fsync
// of the directory. Until the rename, path is untouched and a failure
// removes the temporary file; a reader sees the old file or the new one,
// never a mix. A failed fsync of the directory is returned (wrapped,
// naming it) with the new file in place but its rename perhaps not yet
// durable. The directory must exist.
func WriteDurable(path string, o WriteOptions, fill func(w io.Writer) error) error {
	fsys := forPath(o.FS, path)
	if o.Perm == 0 {
		o.Perm = FilePerm
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	if o.TempPattern == "" {
		o.TempPattern = "." + base + ".tmp*"
	}
	var f File
	var err error
	if o.TempName != "" {
		f, err = fsys.Create(filepath.Join(dir, o.TempName), o.Perm)
	} else {
		f, err = fsys.CreateTemp(dir, o.TempPattern)
	}
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
	if err != nil {
		fsys.Remove(tmp) // path stays as it was
		return err
	}
	return install(fsys, tmp, path, o.NoSync || o.NoDirSync)
}

// Install is the last step of a durable write whose temporary file tmp
// (beside path) is already whole and fsynced — one another library wrote,
// such as a rebuilt bolt database: rename it over path, then fsync the
// directory. A failed rename removes tmp and leaves path as it was; a
// failed fsync of the directory is returned (wrapped, naming it) with the
// new file in place but its rename perhaps not yet durable. noSync skips
// the fsync. fsys nil is OSFS.
func Install(fsys FS, tmp, path string, noSync bool) error {
	return install(forPath(fsys, path), tmp, path, noSync)
}

func install(fsys FS, tmp, path string, noSync bool) error {
	if err := fsys.Rename(tmp, path); err != nil {
		fsys.Remove(tmp) // path stays as it was
		return err
	}
	if noSync {
		return nil
	}
	dir := filepath.Dir(path)
	if err := fsys.SyncDir(dir); err != nil {
		return &DirSyncError{Dir: dir, Err: err}
	}
	return nil
}

// DirSyncError is the error of a durable write whose file is in place but
// whose directory's fsync failed: the rename may not survive a crash.
type DirSyncError struct {
	Dir string
	Err error
}

func (e *DirSyncError) Error() string { return "fsync " + e.Dir + ": " + e.Err.Error() }
func (e *DirSyncError) Unwrap() error { return e.Err }

// Bytes is WriteDurable's fill that writes b.
func Bytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// WriteNew writes b durably to a new file of dir, never replacing one:
// the first of names(0), names(1), … that is not taken (names returns ""
// to give up; the last error is then returned), created exclusively with
// FilePerm, written, fsynced, closed, then dir fsynced — both fsyncs
// skipped when noSync. It returns the name used. dir must exist. The
// quarantines (bytes cut from the log, foreign lines of a view) keep what
// they are given this way.
func WriteNew(dir string, names func(i int) string, b []byte, noSync bool) (string, error) {
	var f *os.File
	var name string
	var err error
	for i := 0; ; i++ {
		n := names(i)
		if n == "" {
			return "", err
		}
		f, err = os.OpenFile(filepath.Join(dir, n), os.O_WRONLY|os.O_CREATE|os.O_EXCL, FilePerm)
		if err == nil {
			name = n
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", err
	}
	if !noSync {
		if err := f.Sync(); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if noSync {
		return name, nil
	}
	return name, SyncDir(dir)
}

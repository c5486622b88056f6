// Package faultfs is the fault seam of durable writes for tests: a
// home.FS (pebble's vfs/errorfs idea) that calls a hook at each stage of
// a write — before the temporary file is written, once it is whole and
// fsynced but not renamed, once renamed but before the directory's fsync
// — naming the file the write replaces. The hook's error fails the write
// there, as a full disk would; a crash test's child blocks in it to be
// killed mid-write. It is passed by value (engine.Options.FS,
// wal.Options.FS, snapshot.Writer.FS), never installed globally.
package faultfs

import (
	"os"

	"github.com/cmlab/cmlab/home"
)

// Stages of a durable write the hook sees.
const (
	StageWrite   = "write"    // before the temporary file is written
	StageRename  = "rename"   // the temporary file is whole and fsynced, not renamed yet
	StageDirSync = "dir-sync" // renamed, the directory not fsynced yet
)

// FS is Inner (home.OSFS when nil) with Hook called at each stage of a
// write; Hook nil fails nothing.
type FS struct {
	Inner home.FS
	Hook  func(stage, path string) error
}

// New is an FS over the real file system calling hook.
func New(hook func(stage, path string) error) FS { return FS{Hook: hook} }

// ForPath implements home.PathFS: the FS of one write of path.
func (f FS) ForPath(path string) home.FS { return bound{f, path} }

func (f FS) inner() home.FS {
	if f.Inner == nil {
		return home.OSFS{}
	}
	return f.Inner
}

// The methods of an FS not bound to a path (a caller that does not go
// through home.WriteDurable or home.Install) pass "" as the path.

func (f FS) CreateTemp(dir, pattern string) (home.File, error) {
	return bound{f, ""}.CreateTemp(dir, pattern)
}
func (f FS) Create(name string, perm os.FileMode) (home.File, error) {
	return bound{f, ""}.Create(name, perm)
}
func (f FS) Rename(oldpath, newpath string) error { return bound{f, ""}.Rename(oldpath, newpath) }
func (f FS) Remove(name string) error             { return f.inner().Remove(name) }
func (f FS) SyncDir(dir string) error             { return bound{f, ""}.SyncDir(dir) }

// bound is f during one write of path.
type bound struct {
	f    FS
	path string
}

func (b bound) fault(stage string) error {
	if b.f.Hook == nil {
		return nil
	}
	return b.f.Hook(stage, b.path)
}

func (b bound) CreateTemp(dir, pattern string) (home.File, error) {
	t, err := b.f.inner().CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return file{t, b}, nil
}

func (b bound) Create(name string, perm os.FileMode) (home.File, error) {
	t, err := b.f.inner().Create(name, perm)
	if err != nil {
		return nil, err
	}
	return file{t, b}, nil
}

func (b bound) Rename(oldpath, newpath string) error {
	if err := b.fault(StageRename); err != nil {
		return err
	}
	return b.f.inner().Rename(oldpath, newpath)
}

func (b bound) Remove(name string) error { return b.f.inner().Remove(name) }

func (b bound) SyncDir(dir string) error {
	if err := b.fault(StageDirSync); err != nil {
		return err
	}
	return b.f.inner().SyncDir(dir)
}

// file fails a write when the hook fails StageWrite.
type file struct {
	home.File
	b bound
}

func (f file) Write(p []byte) (int, error) {
	if err := f.b.fault(StageWrite); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

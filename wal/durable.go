package wal

import (
	"os"
	"path/filepath"

	"github.com/cmlab/cmlab/home"
)

// writeDurable replaces path with b through fsys (home.WriteDurable, the
// one durable-file helper; nil fsys is the real file system): a temporary
// file of the fixed name "."+base+".tmp" beside it, fsync, rename, then
// the directory's fsync unless noDirSync (the caller fsyncs it once after
// several writes). The fixed name is safe: every write of the log's files
// holds the log's lock (or runs on a log no process holds), and the
// leftover of a crash is overwritten by the next write. noSync skips both
// fsyncs (Options.NoSync).
func writeDurable(fsys home.FS, path string, b []byte, noSync, noDirSync bool) error {
	return home.WriteDurable(path, home.WriteOptions{
		FS:        fsys,
		TempName:  "." + filepath.Base(path) + ".tmp",
		NoSync:    noSync,
		NoDirSync: noDirSync,
	}, home.Bytes(b))
}

// compactFS is the seam of a compaction's file writes (segments copied to
// the archive, the manifest): Options.FS, with the fault armed by
// Faults.FailCompactWrite failing the next one before it writes.
func (l *Log) compactFS() home.FS {
	if l.opts.Faults == nil {
		return l.opts.FS
	}
	return compactFaultFS{inner: l.opts.FS, f: l.opts.Faults}
}

// compactFaultFS fails the creation of a temporary file when a compaction
// fault is armed.
type compactFaultFS struct {
	inner home.FS
	f     *Faults
}

func (c compactFaultFS) fs() home.FS {
	if c.inner == nil {
		return home.OSFS{}
	}
	return c.inner
}

func (c compactFaultFS) ForPath(path string) home.FS {
	if p, ok := c.inner.(home.PathFS); ok {
		return compactFaultFS{inner: p.ForPath(path), f: c.f}
	}
	return c
}

func (c compactFaultFS) CreateTemp(dir, pattern string) (home.File, error) {
	if err := c.f.take(&c.f.compactErr); err != nil {
		return nil, err
	}
	return c.fs().CreateTemp(dir, pattern)
}

func (c compactFaultFS) Create(name string, perm os.FileMode) (home.File, error) {
	if err := c.f.take(&c.f.compactErr); err != nil {
		return nil, err
	}
	return c.fs().Create(name, perm)
}

func (c compactFaultFS) Rename(oldpath, newpath string) error { return c.fs().Rename(oldpath, newpath) }
func (c compactFaultFS) Remove(name string) error             { return c.fs().Remove(name) }
func (c compactFaultFS) SyncDir(dir string) error             { return c.fs().SyncDir(dir) }

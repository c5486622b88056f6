package home

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// stRdonly is ST_RDONLY of statfs(2): the filesystem is mounted read-only.
const stRdonly = 0x1

// OnReadOnlyFS reports whether the home's directory lies on a filesystem
// mounted read-only (a read-only bind mount, a read-only snapshot): the log
// cannot even be opened there, since opening takes a lock file and the
// last segment for writing.
func (h Home) OnReadOnlyFS() bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(h.Dir, &st); err != nil {
		return false
	}
	return st.Flags&stRdonly != 0
}

// CopyTo copies the home into dst (which must not exist): directories
// 0700, regular files 0600 with their bytes, except state/daemon.json
// (which names another process). Anything else — a symlink, a FIFO, a
// socket — is refused: a home holds none. It returns the bytes copied.
// A read-only daemon serves such a copy of a home it cannot open in place;
// the copy is scratch, removed when the daemon ends, so nothing is fsynced.
func (h Home) CopyTo(dst string) (int64, error) {
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("copy %s: %s exists", h.Dir, dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	var n int64
	err := filepath.WalkDir(h.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(h.Dir, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, DirPerm)
		case p == h.DaemonFile():
			return nil
		case d.Type().IsRegular():
			c, err := copyFile(p, to)
			n += c
			return err
		}
		return fmt.Errorf("copy %s: %s is a %s, not a file or directory", h.Dir, p, d.Type())
	})
	return n, err
}

func copyFile(from, to string) (int64, error) {
	src, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FilePerm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return n, err
}

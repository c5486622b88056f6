package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors of the package; an error from Open wraps one of them or the
// system's error (fs.ErrNotExist for a missing file).
var (
	// ErrNotRegular: the name is a FIFO, device, socket or directory.
	ErrNotRegular = errors.New("confine: not a regular file")
	// ErrSymlink: a symlink lies on the path (it is not followed).
	ErrSymlink = errors.New("confine: symlink on the path")
	// ErrOutside: the name is absolute, not clean, or climbs out of the root.
	ErrOutside = errors.New("confine: name leaves the root")
	// ErrTooLarge: ReadFile's limit was exceeded.
	ErrTooLarge = errors.New("confine: file too large")
)

const (
	fileFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	dirFlags  = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
)

// Open opens name beneath the directory root (an absolute path, itself
// resolved without following symlinks) and returns it if it is a regular
// file. The file is in blocking mode; the caller closes it.
func Open(root, name string) (*os.File, error) { return open(root, name, true) }

// ReadFile reads name beneath root (as Open) if it holds at most max bytes.
func ReadFile(root, name string, max int64) ([]byte, error) {
	f, err := Open(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, name, max)
}

// readAll reads f if it holds at most max bytes, checked before reading
// and again after (a file that grows meanwhile); name is the file's name
// in the error.
func readAll(f *os.File, name string, max int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTooLarge, name, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s grew past %d bytes", ErrTooLarge, name, max)
	}
	return b, nil
}

// Stat is the fstat of name opened beneath root as Open does.
func Stat(root, name string) (fs.FileInfo, error) { return statOpened(Open(root, name)) }

// statOpened is the fstat of the file an open returned, closed after.
func statOpened(f *os.File, err error) (fs.FileInfo, error) {
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// open is Open; with openat2 false it uses the per-component fallback
// (tests cover both).
func open(root, name string, openat2 bool) (*os.File, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("%w: root %q is not absolute", ErrOutside, root)
	}
	if name == "" || filepath.IsAbs(name) || filepath.Clean(name) != name || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%w: %q", ErrOutside, name)
	}
	var rootFD, fd int
	var err error
	if openat2 {
		rootFD, err = unix.Openat2(unix.AT_FDCWD, filepath.Clean(root), &unix.OpenHow{Flags: dirFlags,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			return open(root, name, false)
		}
	} else {
		rootFD, err = walk(unix.AT_FDCWD, "/", strings.TrimPrefix(filepath.Clean(root), "/"), dirFlags)
	}
	if err != nil {
		return nil, pathError("open", root, err)
	}
	defer unix.Close(rootFD)
	if openat2 {
		fd, err = unix.Openat2(rootFD, name, &unix.OpenHow{Flags: fileFlags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	} else {
		fd, err = walk(rootFD, "", name, fileFlags)
	}
	if err != nil {
		return nil, pathError("open", filepath.Join(root, name), err)
	}
	return regularFile(fd, filepath.Join(root, name), func(uint32) error {
		return fmt.Errorf("%w: %s", ErrNotRegular, filepath.Join(root, name))
	})
}

// regularFile hands back fd (opened with fileFlags, so non-blocking) as a
// blocking file named path if fstat(2) says it is a regular file, and
// closes it otherwise, with notRegular's error for another kind of file.
func regularFile(fd int, path string, notRegular func(mode uint32) error) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathError("fstat", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, notRegular(st.Mode)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, pathError("fcntl", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// walk opens rel beneath dirfd one component at a time, each with
// O_NOFOLLOW: intermediate components as directories (O_PATH), the last
// with flags. An empty rel opens dirfd's start itself (start is then
// opened as a directory).
func walk(dirfd int, start, rel string, flags int) (int, error) {
	fd := dirfd
	if start != "" {
		var err error
		if fd, err = unix.Open(start, dirFlags|unix.O_NOFOLLOW, 0); err != nil {
			return -1, err
		}
	}
	owned := start != ""
	parts := strings.Split(rel, "/")
	if rel == "" {
		parts = nil
	}
	for i, p := range parts {
		if p == "" || p == "." || p == ".." {
			if owned {
				unix.Close(fd)
			}
			return -1, ErrOutside
		}
		fl := dirFlags
		if i == len(parts)-1 {
			fl = flags
		}
		next, err := unix.Openat(fd, p, fl|unix.O_NOFOLLOW, 0)
		if owned {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd, owned = next, true
	}
	if !owned {
		// rel was empty and fd is the caller's: hand back a copy.
		return unix.Dup(fd)
	}
	return fd, nil
}

// pathError maps the system's answers to the package's errors: a symlink
// met with RESOLVE_NO_SYMLINKS or O_NOFOLLOW is ELOOP (or ENOTDIR for an
// intermediate component opened O_DIRECTORY|O_NOFOLLOW), an escape with
// RESOLVE_BENEATH is EXDEV, and a socket opened as a file ENXIO.
func pathError(op, path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %s", ErrSymlink, path)
	case errors.Is(err, unix.EXDEV), errors.Is(err, ErrOutside):
		return fmt.Errorf("%w: %s", ErrOutside, path)
	case errors.Is(err, unix.ENXIO):
		return fmt.Errorf("%w: %s", ErrNotRegular, path)
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

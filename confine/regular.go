package confine

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ReadRegular reads a file a person named on the command line (a mandate,
// a --body file): symlinks are followed, as the shell would, but the
// opened file must be a regular one of at most max bytes. It opens with
// O_NONBLOCK, so a FIFO without a writer does not hang the command, and
// checks the descriptor with fstat(2) before reading: a device (the zero
// device reads without end) or a FIFO is ErrNotRegular, a larger file
// ErrTooLarge, each naming path.
func ReadRegular(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, fileFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is a %s; give the path of a file", ErrNotRegular, path, fileKind(st.Mode))
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if st.Size > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTooLarge, path, st.Size, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s grew past %d bytes", ErrTooLarge, path, max)
	}
	return b, nil
}

// fileKind names the file type of a stat mode.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "special file"
}

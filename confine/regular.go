package confine

import (
	"fmt"
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
	f, err := regularFile(fd, path, func(mode uint32) error {
		return fmt.Errorf("%w: %s is a %s; give the path of a file", ErrNotRegular, path, fileKind(mode))
	})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, max)
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

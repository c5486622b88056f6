package wal

import (
	"os"
	"syscall"
)

// openPrealloc opens a segment for zero-filling, with O_DIRECT where the
// file system supports it (tmpfs does not: then buffered).
func openPrealloc(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err == nil {
		return f, nil
	}
	return os.OpenFile(path, os.O_WRONLY, 0)
}

// datasync is fdatasync(2): the data, and the metadata needed to read it
// back (the file's size among it), without the timestamps fsync adds.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

package wal

import (
	"os"
	"syscall"
)

// flushPiece writes n bytes of f from off back to disk and waits for
// them: sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER). It is not a
// durability barrier (no metadata, no disk cache flush); zeroFill's
// final fdatasync is.
func flushPiece(f *os.File, off, n int64) error {
	const waitBefore, write, waitAfter = 1, 2, 4
	if err := syscall.SyncFileRange(int(f.Fd()), off, n, waitBefore|write|waitAfter); err != nil && err != syscall.ENOSYS {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
	}
	return nil
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

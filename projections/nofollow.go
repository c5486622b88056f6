package projections

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// A view is a regular file of the home that only the projector writes.
// Anything else at its path — a symlink (to a file elsewhere, or to a log
// segment in wal/), a FIFO, a device — must never be opened, cut or
// written through: the damage matrix found a view symlinked to the last
// segment cut acknowledged events out of the log when the home was opened.
// So before a view is trusted or opened, a path that is not a regular file
// is removed (the link itself, never its target) and the view is rebuilt
// from the log like a missing one; and view files are opened with
// O_NOFOLLOW, so a link planted between that check and the open fails
// (ELOOP) instead of being followed.

// noFollow is added to every open of a view for writing.
const noFollow = syscall.O_NOFOLLOW

// dropNonRegular removes path when it exists and is not a regular file
// (a directory is refused: it is not ours to remove). It reports whether
// it removed something.
func dropNonRegular(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case fi.Mode().IsRegular():
		return false, nil
	case fi.IsDir():
		return false, fmt.Errorf("projections: %s is a directory where a view belongs: move it away and run `cmlab rebuild`", path)
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("projections: remove %s (a %s where a view belongs): %w", path, fi.Mode().Type(), err)
	}
	return true, nil
}

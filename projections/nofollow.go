package projections

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cmlab/cmlab/home"
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

// dropNonRegular is home.DropNonRegular for a view, whose error for a
// directory says how to get the view back.
func dropNonRegular(path string) (bool, error) {
	removed, err := home.DropNonRegular(path, "a view")
	if errors.Is(err, home.ErrIsDir) {
		return false, fmt.Errorf("projections: %s is a directory where a view belongs: move it away and run `cmlab rebuild`", path)
	}
	if err != nil {
		return false, fmt.Errorf("projections: %w", err)
	}
	return removed, nil
}

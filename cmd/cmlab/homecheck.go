package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// A command never creates a home by accident: opening a home that does
// not exist (a typo in --home, or no --home while the daemon serves another
// one) would otherwise make a brand-new empty one and answer from it. Only
// 'cmlab serve', 'cmlab demo', a command given --init, or one pointed at an
// existing empty directory create a home, and the last two say so.

// homeSource says where the home directory came from, for messages.
func (g *globalOpts) homeSource() string {
	switch {
	case g.home != "":
		return "from --home"
	case os.Getenv("CMLAB_HOME") != "":
		return "from $CMLAB_HOME"
	}
	return "the default ~/.cm: no --home and no $CMLAB_HOME"
}

// homeExists reports whether h is a cmlab home: its directory has wal/.
func homeExists(h home.Home) (bool, error) {
	fi, err := os.Stat(h.WALDir())
	switch {
	case err == nil && fi.IsDir():
		return true, nil
	case err == nil:
		return false, fmt.Errorf("%s is not a directory", h.WALDir())
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// emptyDir reports whether dir exists and has no entries.
func emptyDir(dir string) bool {
	des, err := os.ReadDir(dir)
	return err == nil && len(des) == 0
}

// existingHome resolves the command's home (Home) and refuses it, as
// requireHome does, when it does not exist: the start of every command
// that talks to a home's daemon or opens it in-process.
func (g *globalOpts) existingHome() (home.Home, error) {
	h, err := g.Home()
	if err != nil {
		return h, err
	}
	return h, requireHome(g, h)
}

// requireHome refuses a home that does not exist unless --init was given
// or its directory exists and is empty (made for it).
func requireHome(g *globalOpts, h home.Home) error {
	ok, err := homeExists(h)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	if engine.WantsAdoption(h) {
		// A home content-machine's Lab wrote: the open adopts it
		// (engine/adopt.go) and says what it took.
		return nil
	}
	if g.init || emptyDir(h.Dir) {
		// Asked for (--init), or a directory made for it: make it now,
		// whole (the command after may only read it), and say so once.
		return createHome(g, h) // init_home.go
	}
	return newCLIError(exitError, "NO_HOME", fmt.Sprintf("no cmlab home at %s (%s)", h.Dir, g.homeSource()),
		"pass --home DIR or set $CMLAB_HOME to the home you use ('cmlab status --home DIR' shows whether a daemon serves it), or add --init to create a new home here")
}

// corruptFix is what to type about a corrupt log: look, then salvage.
func corruptFix(homeFlag string) string {
	home := ""
	if homeFlag != "" {
		home = " --home " + homeFlag
	}
	return "see every damaged place with 'cmlab recover" + home + "', then keep every intact entry with 'cmlab recover --salvage --apply" + home + "' (stop the daemon first)"
}

// manifestFix is what to type about a damaged or missing wal/MANIFEST:
// rebuild it from the segments on disk (wal.RepairManifest), never
// salvage (placeholders over history the archive still holds).
func manifestFix(homeFlag string) string {
	home := ""
	if homeFlag != "" {
		home = " --home " + homeFlag
	}
	return "rebuild wal/MANIFEST from the segments on disk with 'cmlab compact --repair-manifest --archive DIR" + home + "' (DIR: where compaction archived the log's front; add --deleted if it was compacted without --archive; stop the daemon first)"
}

// fixForCorrupt is the fix for a corruption error err.
func fixForCorrupt(homeFlag string, err error) string {
	if errors.Is(err, wal.ErrBadManifest) {
		return manifestFix(homeFlag)
	}
	return corruptFix(homeFlag)
}

// isCorrupt reports whether err is log corruption (exit 3 everywhere).
func isCorrupt(err error) bool { return errors.Is(err, wal.ErrCorrupt) }

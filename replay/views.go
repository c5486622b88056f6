package replay

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// Projector is what replay drives to build views: the production
// projections.Projector, or a test double. Apply receives events in log order.
type Projector interface {
	Apply(evs []*events.Event) error
	Close() error
}

// ProjectorFactory opens a projector writing the views of h.
type ProjectorFactory func(h home.Home) (Projector, error)

// DefaultProjector is the production projector.
func DefaultProjector(h home.Home) (Projector, error) {
	return projections.New(h), nil
}

// viewExcluded lists the home-relative paths that are not views: the log,
// daemon state (token, daemon.json, checkpoint), quarantined bytes and
// exports written on request.
var viewExcluded = []string{"wal", "state", "quarantine", "lab/exports"}

// ViewFiles lists the view files of a home, home-relative with forward
// slashes, sorted. Hidden files (temporaries of atomic writes) are skipped.
func ViewFiles(h home.Home) ([]string, error) {
	var out []string
	err := filepath.WalkDir(h.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel := h.Rel(p)
		if p == h.Dir {
			return nil
		}
		for _, x := range viewExcluded {
			if rel == x {
				return filepath.SkipDir
			}
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// fileSize is the size of a home-relative file, -1 when it does not exist.
func fileSize(h home.Home, rel string) (int64, error) {
	fi, err := os.Stat(filepath.Join(h.Dir, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

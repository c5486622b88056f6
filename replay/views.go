package replay

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// DefaultProjector is the production projector writing a new home from
// empty: it buffers until Close, which fsyncs the views and checkpoints.
func DefaultProjector(h home.Home) (Projector, error) {
	return projections.Open(projections.Options{Home: h, Fresh: true, Exclusive: true})
}

// shadowProjector is the production projector for a throw-away shadow
// home: no fsync. Buffered (Exclusive) unless the caller watches file
// sizes after each Apply.
func shadowProjector(buffered bool) ProjectorFactory {
	return func(h home.Home) (Projector, error) {
		return projections.Open(projections.Options{Home: h, Fresh: true, Exclusive: buffered, NoSync: true})
	}
}

// viewRoots are the home-relative directories that hold views (SPEC §2).
// Everything else — the log, daemon state (token, daemon.json, checkpoint),
// quarantined bytes, exports written on request, files the operator keeps
// in the home — is not a projection of the log.
var viewRoots = []string{"feedback", "lab", "pty", "steps"}

// viewExcluded are directories under viewRoots that are not views.
var viewExcluded = []string{"lab/exports"}

// ViewFiles lists the view files of a home, home-relative with forward
// slashes, sorted. Hidden files (temporaries of atomic writes) are skipped.
func ViewFiles(h home.Home) ([]string, error) {
	var out []string
	for _, root := range viewRoots {
		err := filepath.WalkDir(filepath.Join(h.Dir, root), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			rel := h.Rel(p)
			if slices.Contains(viewExcluded, rel) {
				return filepath.SkipDir
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
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
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

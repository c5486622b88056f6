package replay

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

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

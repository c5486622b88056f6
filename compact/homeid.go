package compact

import (
	"errors"
	"os"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// HomeID returns the id compaction records in the archive and the
// manifest (wal archive.go): state/home-id, created the first time. A home
// whose state/home-id is gone while its wal/MANIFEST records an id takes
// that id back, so that its own archive is not refused as another home's.
func HomeID(h home.Home) (string, error) {
	id, err := home.ReadHomeID(h)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	if m, merr := wal.ReadManifest(h.WALDir()); merr == nil && m != nil && m.HomeID != "" {
		return m.HomeID, home.WriteHomeID(h, m.HomeID)
	}
	return home.EnsureHomeID(h)
}

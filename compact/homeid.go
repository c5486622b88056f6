package compact

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

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

// keepShipKey copies the home's ship key (state/ship-key, package ship)
// into the archive as ship-key when it is not there yet: the archive then
// holds what a restore from the home's stream needs to authenticate it
// (cmlab restore --key-from-archive DIR), after the home's disk is gone.
func keepShipKey(h home.Home, archive string) error {
	k, err := os.ReadFile(h.ShipKeyFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	dst := filepath.Join(archive, "ship-key")
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, k) {
		return nil
	}
	return home.WriteFileAtomic(dst, k)
}

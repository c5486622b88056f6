package home

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// The home id, state/home-id: one line holding a UUIDv7, created the first
// time something needs to tell this home from another (shipping to NATS,
// compaction recording whose archive it writes) and never changed after.
// It is written like every small state file (tmp, fsync, rename, directory
// fsync). A home made before home ids existed gets one at its first
// compaction or shipment; one whose state/home-id was lost takes back the
// id its wal/MANIFEST recorded (package compact), so its archive stays
// its own.

// ErrBadHomeID is returned for a home id that cannot be a NATS subject
// token and part of a stream name.
var ErrBadHomeID = errors.New("invalid home id")

var homeIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// ValidateHomeID checks that id is 1–64 characters of [A-Za-z0-9_-].
func ValidateHomeID(id string) error {
	if !homeIDRE().MatchString(id) {
		return fmt.Errorf("%w %q: want 1–64 characters of [A-Za-z0-9_-]", ErrBadHomeID, id)
	}
	return nil
}

// HomeIDFile is state/home-id.
func (h Home) HomeIDFile() string { return h.path("state", "home-id") }

// ReadHomeID returns h's id, or an error wrapping os.ErrNotExist when it
// has none yet.
func ReadHomeID(h Home) (string, error) {
	b, err := os.ReadFile(h.HomeIDFile())
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if err := ValidateHomeID(id); err != nil {
		return "", fmt.Errorf("%s: %w", h.Rel(h.HomeIDFile()), err)
	}
	return id, nil
}

// EnsureHomeID returns h's id, creating state/home-id (a UUIDv7) the first
// time.
func EnsureHomeID(h Home) (string, error) {
	id, err := ReadHomeID(h)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	u, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return u.String(), WriteHomeID(h, u.String())
}

// WriteHomeID sets h's id.
func WriteHomeID(h Home, id string) error {
	if err := ValidateHomeID(id); err != nil {
		return err
	}
	if err := MkdirAllSync(h.StateDir()); err != nil {
		return err
	}
	return WriteFileAtomic(h.HomeIDFile(), []byte(id+"\n"))
}

// ShipKeyFile is state/ship-key: the secret the home's shipper signs each
// event it publishes with (package ship), so that a restore can tell the
// home's own events from forged or foreign ones. Compaction keeps a copy
// in its archive (ship-key there), so the archive can authenticate a
// restore after the home's disk is gone.
func (h Home) ShipKeyFile() string { return h.path("state", "ship-key") }

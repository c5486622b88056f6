package ship

import (
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/ship/cursor"
)

// ErrBadHomeID is returned for a home id that cannot be a subject token
// and part of a stream name.
var ErrBadHomeID = home.ErrBadHomeID

// ValidateHomeID checks that id may be one NATS subject token and part of a
// stream name: 1–64 characters of [A-Za-z0-9_-].
func ValidateHomeID(id string) error { return home.ValidateHomeID(id) }

// HomeIDFile is state/home-id of h (package home keeps the id).
func HomeIDFile(h home.Home) string { return h.HomeIDFile() }

// ReadHomeID returns h's id, or an error wrapping os.ErrNotExist when it
// has none yet.
func ReadHomeID(h home.Home) (string, error) { return home.ReadHomeID(h) }

// EnsureHomeID returns h's id, creating state/home-id (a UUIDv7) the first
// time.
func EnsureHomeID(h home.Home) (string, error) { return home.EnsureHomeID(h) }

// WriteHomeID sets h's id (restore gives the new home the id it restored).
func WriteHomeID(h home.Home, id string) error { return home.WriteHomeID(h, id) }

// DefaultStream is the stream name used when none is given: CMLAB_<id>.
func DefaultStream(homeID string) string { return "CMLAB_" + homeID }

// Subject is the subject of an event of type typ of home id.
func Subject(homeID, typ string) string { return "cmlab." + homeID + "." + typ }

// SubjectFilter is the one subject filter of a home's stream.
func SubjectFilter(homeID string) string { return "cmlab." + homeID + ".>" }

// State is state/ship.json (package cursor).
type State = cursor.State

// StateFile is state/ship.json of h.
func StateFile(h home.Home) string { return cursor.File(h) }

// ReadState reads state/ship.json; an error wraps os.ErrNotExist when
// shipping never ran for h.
func ReadState(h home.Home) (State, error) { return cursor.Read(h) }

func writeState(h home.Home, s State) error { return cursor.Write(h, s) }

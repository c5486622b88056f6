// Package cursor is state/ship.json, the shipping cursor of a home: the
// last seq its NATS JetStream stream acknowledged, and the last error.
// Package ship writes it; `cmlab status` and the daemon's /metrics read it
// (so they show the lag whichever process ships). It is replaced
// atomically: tmp → fsync → rename → directory fsync.
package cursor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/home"
)

// ErrOtherHome: a stream, or a cursor, of another home id (package ship
// names it too).
var ErrOtherHome = errors.New("ship: another home's stream")

// CheckHome refuses a cursor written for another home than id, naming the
// fix: its shipped seq says nothing of this home's stream (cmlab ship
// would resume from it, compaction would archive events never shipped).
func (s State) CheckHome(h home.Home, id string) error {
	if s.HomeID == id {
		return nil
	}
	return fmt.Errorf("%w: %s is the cursor of home %s, this home is %s\n  fix: if state/home-id changed, write the id the cursor names back into it; if the cursor is the wrong file, with no cmlab ship running remove state/ship.json and run 'cmlab ship' (before compacting): it goes on from what the stream holds",
		ErrOtherHome, h.Rel(File(h)), s.HomeID, id)
}

// State is state/ship.json: the shipping cursor and the last error.
type State struct {
	HomeID string `json:"home_id"`
	Stream string `json:"stream"`
	URL    string `json:"url,omitempty"`
	// Shipped is the last seq the stream acknowledged (every seq up to it
	// is in the stream, once, in order).
	Shipped uint64 `json:"shipped_seq"`
	// LastSeq is the local log's last seq as the shipper last saw it.
	LastSeq   uint64 `json:"last_seq"`
	UpdatedAt string `json:"updated_at"`
	// LastError is the last failure; kept until a batch is acknowledged
	// again. Retrying says the shipper is backing off because of it.
	LastError   string `json:"last_error,omitempty"`
	LastErrorAt string `json:"last_error_at,omitempty"`
	Retrying    bool   `json:"retrying,omitempty"`
	// Stopped is set when the shipper refused to go on (another home's
	// stream, a foreign cursor): it will not retry.
	Stopped bool `json:"stopped,omitempty"`
}

// Lag is how many local events the stream does not hold yet.
func (s State) Lag() uint64 {
	if s.LastSeq > s.Shipped {
		return s.LastSeq - s.Shipped
	}
	return 0
}

// File is state/ship.json of h.
func File(h home.Home) string { return filepath.Join(h.StateDir(), "ship.json") }

// Read reads state/ship.json; an error wraps os.ErrNotExist when
// shipping never ran for h.
func Read(h home.Home) (State, error) {
	var s State
	b, err := os.ReadFile(File(h))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		// Removing it is safe only before a compaction: without a cursor
		// nothing holds the unshipped events in the log, and the shipper
		// reads the log, not the archive.
		return s, fmt.Errorf("ship cursor: %s: %w; fix: with no cmlab ship running, remove it and run 'cmlab ship --nats URL' before compacting: it writes the cursor again from what the stream holds", h.Rel(File(h)), err)
	}
	return s, nil
}

// Write replaces state/ship.json atomically and durably, setting UpdatedAt.
func Write(h home.Home, s State) error {
	s.UpdatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(File(h), append(b, '\n'))
}

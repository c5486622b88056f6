package ship

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/home"
)

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

// StateFile is state/ship.json of h.
func StateFile(h home.Home) string { return filepath.Join(h.StateDir(), "ship.json") }

// ReadState reads state/ship.json; an error wraps os.ErrNotExist when
// shipping never ran for h.
func ReadState(h home.Home) (State, error) {
	var s State
	b, err := os.ReadFile(StateFile(h))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("ship: %s: %w", h.Rel(StateFile(h)), err)
	}
	return s, nil
}

// writeState replaces state/ship.json atomically and durably.
func writeState(h home.Home, s State) error {
	s.UpdatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(StateFile(h), append(b, '\n'))
}

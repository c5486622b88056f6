package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/home"
)

// A home built by 'cmlab replay --into' is a copy of the past: writing
// into it would mix new events into history. Its state/replayed.json says
// where it came from, and 'cmlab serve' serves it read-only unless
// --writable asks otherwise.

// replayedMark is the content of state/replayed.json.
type replayedMark struct {
	From    string `json:"from"`    // the source home
	UpToSeq uint64 `json:"upToSeq"` // the last replayed sequence
	At      string `json:"at"`      // when it was replayed (RFC 3339)
}

func replayedFile(h home.Home) string { return filepath.Join(h.StateDir(), "replayed.json") }

// markReplayed writes state/replayed.json into the replayed home into.
func markReplayed(into, src home.Home, last uint64) error {
	b, err := json.Marshal(replayedMark{From: src.Dir, UpToSeq: last, At: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	if err := os.WriteFile(replayedFile(into), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("mark the replayed home: %w", err)
	}
	return nil
}

// replayedHome returns the mark of a replayed home, nil for any other.
func replayedHome(h home.Home) (*replayedMark, error) {
	b, err := os.ReadFile(replayedFile(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m replayedMark
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", replayedFile(h), err)
	}
	return &m, nil
}

// serveReplayedGuard makes 'cmlab serve' of a replayed home read-only
// unless --writable, and says so on stderr.
func serveReplayedGuard(h home.Home, o *serveOpts, stderr io.Writer) error {
	m, err := replayedHome(h)
	if err != nil || m == nil || o.readOnly {
		return err
	}
	if o.writable {
		fmt.Fprintf(stderr, "cmlab serve: %s is a replay of %s up to seq %d; serving it writable (--writable)\n", h.Dir, m.From, m.UpToSeq)
		return nil
	}
	o.readOnly = true
	fmt.Fprintf(stderr, "cmlab serve: %s is a replay of %s up to seq %d: serving it read-only (--writable to allow writes)\n", h.Dir, m.From, m.UpToSeq)
	return nil
}

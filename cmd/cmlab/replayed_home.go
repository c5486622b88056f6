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
	"github.com/cmlab/cmlab/labapi"
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

// replayedHome returns the mark of a replayed home, nil for any other. A
// mark that is there but cannot be read (cut, not JSON, unreadable) is a
// *cliError naming the fix: the home is still a replay, so what takes
// writes refuses them.
func replayedHome(h home.Home) (*replayedMark, error) {
	p := replayedFile(h)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var m replayedMark
	if err == nil {
		if err = json.Unmarshal(b, &m); err == nil {
			return &m, nil
		}
	}
	return nil, newCLIError(exitError, labapi.CodeForbidden,
		fmt.Sprintf("%s marks %s as a replay made by 'cmlab replay --into', which takes no write, but it cannot be read (%v)", p, h.Dir, err),
		"serve the replay with 'cmlab serve --read-only --home "+home.ShellQuote(h.Dir)+"'; to write into it anyway pass --writable; if it is no replay, remove "+home.ShellQuote(p))
}

// serveReplayedGuard makes 'cmlab serve' of a replayed home read-only
// unless --writable, and says so on stderr. A mark that cannot be read
// refuses the start (naming --read-only) unless --read-only or --writable
// says what to do.
func serveReplayedGuard(h home.Home, o *serveOpts, stderr io.Writer) error {
	if o.readOnly {
		return nil // asked for: the mark, damaged or not, adds nothing
	}
	m, err := replayedHome(h)
	var ce *cliError
	if errors.As(err, &ce) && o.writable {
		fmt.Fprintf(stderr, "cmlab serve: %s; serving it writable (--writable)\n", ce.Message)
		return nil
	}
	if err != nil || m == nil {
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

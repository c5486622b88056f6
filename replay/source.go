package replay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// ErrNoLog is returned when a home has no log to replay.
var ErrNoLog = errors.New("replay: no log")

// Source is where To reads a home's history: its log (Log), or a copy of
// it kept elsewhere (ship.Source reads one from a NATS JetStream stream).
// Events yields from ≤ seq ≤ to (to 0: to the end) in order; LastSeq is
// the last sequence it holds.
type Source interface {
	Events(ctx context.Context, from, to uint64) iter.Seq2[*events.Event, error]
	LastSeq(ctx context.Context) (uint64, error)
}

// Log is a read-only view of a home's log through wal.Reader: it takes no
// lock, so replay works while a daemon owns and appends to the log. A write
// in progress (or a torn tail the owner will repair at its next open) at
// the end of the last segment is simply not there yet; damage anywhere else
// ends a read with an error wrapping wal.ErrCorrupt.
type Log struct {
	r *wal.Reader
}

// OpenLog opens the log in dir (home/wal) for reading. The sequences
// before a compacted log's first retained one are read from the archive
// wal/MANIFEST names; where they were deleted or the archive is gone,
// reading them fails with an error wrapping wal.ErrCompacted.
func OpenLog(dir string) (*Log, error) { return OpenLogArchive(dir, "") }

// OpenLogArchive is OpenLog reading archived sequences from the segment
// files in archive (when not empty) instead of where the manifest says.
func OpenLogArchive(dir, archive string) (*Log, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoLog, filepath.Base(dir))
	}
	r, err := wal.OpenReader(dir)
	if err != nil {
		return nil, err
	}
	r.SetArchive(archive)
	return &Log{r: r}, nil
}

// ctxCheckEvery is how many events pass between checks of the context.
const ctxCheckEvery = 1024

// Events iterates over the events with from ≤ seq ≤ to (to 0: to the end
// as it stands while reading). An error ends the iteration.
func (l *Log) Events(ctx context.Context, from, to uint64) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(nil, err)
			return
		}
		n := 0
		for ev, err := range l.r.Events(max(from, 1)) {
			if err != nil {
				yield(nil, fmt.Errorf("replay: %w", err))
				return
			}
			if to != 0 && ev.Seq > to {
				return
			}
			if n++; n%ctxCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					yield(nil, err)
					return
				}
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// LastSeq is the sequence of the last complete entry on disk (0 when empty).
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return l.r.LastSeq()
}

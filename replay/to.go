package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// ErrNotEmpty is returned when a replay target directory already holds files.
var ErrNotEmpty = errors.New("replay: target directory is not empty")

// ErrNothing is returned when no event matches the replay bound.
var ErrNothing = errors.New("replay: no event at or before the bound")

// ToOptions configure To.
type ToOptions struct {
	// Src is the home whose log is replayed (read without its lock).
	Src home.Home
	// Source, when set, is read instead of Src's log.
	Source Source
	// Into is the new home to build. It must not exist or be empty.
	Into home.Home
	// UpTo is the last sequence to include. 0: no sequence bound.
	UpTo uint64
	// Until, when non-zero, stops before the first event whose ts is later.
	Until time.Time
	// NoLog skips copying the log prefix into Into/wal.
	NoLog bool
	// Projector builds the views; default DefaultProjector.
	Projector ProjectorFactory
	// Progress, when set, is called after each applied batch.
	Progress func(seq uint64)
	// Archive, when set, is where the archived segments of a compacted
	// source log are (see OpenLogArchive).
	Archive string
}

// ToResult describes a replayed home.
type ToResult struct {
	First, Last uint64 // sequences included (Last 0: none)
	LastTS      int64  // ts of the last included event
	Events      int
}

// batchSize is how many events are handed to the projector at once.
const batchSize = 256

// copyBatch is how many entries of the log copy are appended (and fsynced)
// at once: below wal's default group size of 4096.
const copyBatch = 4096

// To builds, in opts.Into, a home whose views are exactly what they were
// right after the bound event: the events up to it are projected in order
// into empty views, and their log entries copied into Into/wal so the
// replayed home is self-contained (a daemon can open it, e.g.
// `cmlab serve --read-only`). The source log is only read.
func To(ctx context.Context, opts ToOptions) (*ToResult, error) {
	if opts.Projector == nil {
		opts.Projector = DefaultProjector
	}
	if err := EnsureEmpty(opts.Into.Dir); err != nil {
		return nil, err
	}
	src := opts.Source
	if src == nil {
		l, err := OpenLogArchive(opts.Src.WALDir(), opts.Archive)
		if err != nil {
			return nil, err
		}
		src = l
	}
	// Refuse a bound outside the log before creating anything.
	last, err := src.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	if opts.UpTo > last {
		return nil, fmt.Errorf("replay: the log ends at seq %d, before --to %d", last, opts.UpTo)
	}
	if !opts.Until.IsZero() {
		for ev, err := range src.Events(ctx, 1, 0) {
			if err != nil {
				return nil, err
			}
			if ev.TS > opts.Until.UnixMilli() {
				return nil, fmt.Errorf("%w: the first event (seq %d) is at %s", ErrNothing, ev.Seq, ev.ISOTime())
			}
			break
		}
	}
	if last == 0 {
		return nil, fmt.Errorf("%w: the log is empty", ErrNothing)
	}
	if err := opts.Into.Ensure(); err != nil {
		return nil, err
	}
	var dst *wal.Log
	if !opts.NoLog {
		if dst, err = wal.Open(wal.Options{Dir: opts.Into.WALDir(), QuarantineDir: opts.Into.QuarantineDir()}); err != nil {
			return nil, fmt.Errorf("replay: create log copy: %w", err)
		}
		defer func() {
			if dst != nil {
				dst.Close()
			}
		}()
	}
	p, err := opts.Projector(opts.Into)
	if err != nil {
		return nil, err
	}
	res := &ToResult{}
	var batch, copies []*events.Event
	copyOut := func() error {
		if len(copies) == 0 {
			return nil
		}
		seqs, err := dst.Append(ctx, copies...)
		if err != nil {
			return fmt.Errorf("replay: copy log: %w", err)
		}
		if seqs[0] != copies[0].Seq {
			return fmt.Errorf("replay: log copy starts at seq %d, source at %d", seqs[0], copies[0].Seq)
		}
		copies = copies[:0]
		return nil
	}
	flush := func(final bool) error {
		if len(batch) == 0 {
			if final && dst != nil {
				return copyOut()
			}
			return nil
		}
		if dst != nil {
			// Seq and TS are already set; the copy keeps both, so its entries
			// are byte-identical to the source's. Copies go out in groups of
			// copyBatch: one fsync each.
			for _, ev := range batch {
				c := *ev
				copies = append(copies, &c)
			}
			if len(copies) >= copyBatch || final {
				if err := copyOut(); err != nil {
					return err
				}
			}
		}
		if err := p.Apply(batch); err != nil {
			return fmt.Errorf("replay: project up to seq %d: %w", batch[len(batch)-1].Seq, err)
		}
		if opts.Progress != nil {
			opts.Progress(batch[len(batch)-1].Seq)
		}
		batch = batch[:0]
		return nil
	}
	var runErr error
	for ev, err := range src.Events(ctx, 1, opts.UpTo) {
		if err != nil {
			runErr = err
			break
		}
		if !opts.Until.IsZero() && ev.TS > opts.Until.UnixMilli() {
			break
		}
		if res.First == 0 {
			res.First = ev.Seq
		}
		res.Last, res.LastTS = ev.Seq, ev.TS
		res.Events++
		batch = append(batch, ev)
		if len(batch) == batchSize {
			if runErr = flush(false); runErr != nil {
				break
			}
		}
	}
	if runErr == nil {
		runErr = flush(true)
	}
	if err := p.Close(); runErr == nil {
		runErr = err
	}
	if dst != nil {
		err := dst.Close()
		dst = nil
		if runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		return nil, runErr
	}
	if opts.UpTo != 0 && res.Last < opts.UpTo {
		return res, fmt.Errorf("replay: the log ends at seq %d, before --to %d", res.Last, opts.UpTo)
	}
	if res.Events == 0 {
		return res, ErrNothing
	}
	return res, nil
}

// EnsureEmpty refuses a directory that exists and is not empty (ErrNotEmpty).
func EnsureEmpty(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w (%d entries)", ErrNotEmpty, len(ents))
	}
	return nil
}

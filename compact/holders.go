package compact

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/cmlab/cmlab/steps"
)

// RetentionHolder is something that still needs part of the log: a
// compaction removes no segment holding its OldestNeededSeq or anything
// after it. To keep a new reader's position in the log (a shipping
// cursor in state/ship.json, say), add a holder to Options.Holders (the
// daemon's policy and `cmlab compact` take the same list):
//
//	compact.RetentionHolder{Name: "ship cursor", OldestNeededSeq: func(ctx context.Context) (uint64, error) {
//		c, err := readShipCursor(h) // the next seq to ship
//		return c.Next, err         // 0: needs nothing; an error aborts the compaction
//	}}
type RetentionHolder struct {
	Name string
	// OldestNeededSeq returns the oldest seq the holder still needs, 0 if
	// none. An error aborts the compaction (nothing is removed).
	OldestNeededSeq func(ctx context.Context) (uint64, error)
	// ReadsArchive: the holder reads the log through package wal, which
	// reads archived segments back from the archive the manifest names.
	// A compaction that archives leaves its needs met; only a deleting
	// one respects it.
	ReadsArchive bool
}

// Scan is what the step, block and window holders need from one pass
// over the retained log.
type Scan struct {
	Last uint64 // last seq scanned
	// OpenSteps is the oldest first step event of a mandate with a step
	// not completed or failed (0: none).
	OpenSteps uint64
	// OpenBlocks is the oldest pty.block.begin without its end (0: none).
	OpenBlocks uint64
	// FirstInWindow is the first event newer than the auto-resume window's
	// start (Last+1: none).
	FirstInWindow uint64
	// FirstSince is the first event at or after the keep-days cutoff
	// (Last+1: none; the first scanned without a cutoff).
	FirstSince uint64
}

// ScanLog reads the retained log of src once. window is the start of the
// auto-resume window, since the keep-days cutoff (zero: none).
func ScanLog(ctx context.Context, src Source, window, since time.Time) (*Scan, error) {
	last := src.LastSeq()
	sc := &Scan{Last: last, FirstInWindow: last + 1, FirstSince: last + 1}
	winMS, sinceMS := window.UnixMilli(), since.UnixMilli()
	stepsOpen := newStepScan()
	type blockKey struct{ conv, block string }
	open := map[blockKey]uint64{}
	n := 0
	for ev, err := range src.Events(src.FirstSeq()) {
		if err != nil {
			return nil, err
		}
		if ev.Seq > last {
			break
		}
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if sc.FirstInWindow > last && ev.TS > winMS {
			sc.FirstInWindow = ev.Seq
		}
		if sc.FirstSince > last && (since.IsZero() || ev.TS >= sinceMS) {
			sc.FirstSince = ev.Seq
		}
		switch ev.Type {
		case events.TypePtyBlockBegin:
			if b, err := events.DecodeAs[*events.PtyBlockBegin](ev); err == nil {
				open[blockKey{ev.Stream, b.Block.BlockID}] = ev.Seq
			}
		case events.TypePtyBlockEnd:
			if b, err := events.DecodeAs[*events.PtyBlockEnd](ev); err == nil {
				delete(open, blockKey{ev.Stream, b.Block.BlockID})
			}
		default:
			stepsOpen.observe(ev)
		}
	}
	for _, seq := range open {
		if sc.OpenBlocks == 0 || seq < sc.OpenBlocks {
			sc.OpenBlocks = seq
		}
	}
	sc.OpenSteps = stepsOpen.oldestOpen()
	return sc, nil
}

// stepScan follows step state through the steps package's State (the
// narrowest existing reader of step transitions) and the first step event of
// each mandate.
type stepScan struct {
	state *steps.State
	first map[string]uint64 // mandate id → its first step event in the retained log
}

func newStepScan() *stepScan {
	return &stepScan{state: steps.NewState(), first: map[string]uint64{}}
}

func (s *stepScan) observe(ev *events.Event) {
	switch ev.Type {
	case events.TypeStepPlanned, events.TypeStepExecuting, events.TypeStepCompleted,
		events.TypeStepFailed, events.TypeStepNeedsReview, events.TypeStepReset:
		if _, ok := s.first[ev.Stream]; !ok {
			s.first[ev.Stream] = ev.Seq
		}
	case events.TypeRecoveryApplied:
	default:
		return
	}
	s.state.Observe(ev)
}

// oldestOpen is the oldest first step event of a mandate that has a step
// neither completed nor failed; 0 if there is none.
func (s *stepScan) oldestOpen() uint64 {
	var oldest uint64
	for _, m := range s.state.Mandates() {
		open := false
		for _, st := range m.Steps {
			if st.Status != events.StatusCompleted && st.Status != events.StatusFailed {
				open = true
			}
		}
		if !open {
			continue
		}
		seq := s.first[m.MandateID]
		if m.PlannedSeq != 0 && (seq == 0 || m.PlannedSeq < seq) {
			seq = m.PlannedSeq
		}
		if seq != 0 && (oldest == 0 || seq < oldest) {
			oldest = seq
		}
	}
	return oldest
}

// unshipped is the first seq the home's JetStream stream has not
// acknowledged (state/ship.json, package ship), 0 when the home does not
// ship. Those events exist nowhere else; the shipper reads the log
// directory (not the archive), so the hold stands against archiving too.
func unshipped(h home.Home) (uint64, error) {
	st, err := cursor.Read(h)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Shipped + 1, nil
}

// DefaultHolders are the built-in holders of home h, the step, block and
// window ones answering from sc.
func DefaultHolders(h home.Home, sc *Scan) []RetentionHolder {
	fixed := func(seq uint64) func(context.Context) (uint64, error) {
		return func(context.Context) (uint64, error) { return seq, nil }
	}
	return []RetentionHolder{
		{Name: "checkpoint", OldestNeededSeq: func(context.Context) (uint64, error) {
			cp, err := projections.ReadCheckpoint(h)
			if err != nil {
				return 0, err
			}
			if cp == nil {
				return 1, nil // the views are rebuilt from the start
			}
			return cp.Seq + 1, nil
		}},
		{Name: "open steps", OldestNeededSeq: fixed(sc.OpenSteps)},
		{Name: "open terminal blocks", OldestNeededSeq: fixed(sc.OpenBlocks)},
		{Name: "auto-resume window", OldestNeededSeq: fixed(sc.FirstInWindow)},
		{Name: "ship cursor", OldestNeededSeq: func(context.Context) (uint64, error) { return unshipped(h) }},
		// Request-id dedupe, Lab state, steps, terminal sessions and view
		// rebuilds read the whole log until snapshots exist.
		{Name: "read models", OldestNeededSeq: fixed(1), ReadsArchive: true},
	}
}

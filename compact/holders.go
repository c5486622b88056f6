package compact

import (
	"context"
	"errors"
	"math"
	"os"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/cmlab/cmlab/snapshot"
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

// ScanLog reads the retained log of src once, from its first seq: the
// reference answer of the step, block and window holders when no model
// is at hand (ScanModel gives the same from the retention model). window
// is the start of the auto-resume window, since the keep-days cutoff
// (zero: none).
func ScanLog(ctx context.Context, src Source, window, since time.Time) (*Scan, error) {
	m := retention.New()
	last := src.LastSeq()
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
		m.Observe(ev)
	}
	return ScanModel(ctx, src, m, window, since)
}

// ScanModel answers the step, block and window holders from m, the
// retention model of src's log (retention.Model: its snapshot and the log
// after it), first bringing m up to src's last seq: only what m does not
// cover yet is read, and the one run of the timestamp index holding the
// window's (or the keep-days cutoff's) first event.
func ScanModel(ctx context.Context, src Source, m *retention.Model, window, since time.Time) (*Scan, error) {
	first, last := src.FirstSeq(), src.LastSeq()
	if c := m.Covered(); c < last {
		// Observe skips what it covers: the daemon's engine may feed the
		// same events concurrently, each is applied once, in order.
		for ev, err := range src.Events(max(c+1, first)) {
			if err != nil {
				return nil, err
			}
			if ev.Seq > last {
				break
			}
			m.Observe(ev)
		}
	}
	sc := &Scan{Last: last, FirstInWindow: last + 1, FirstSince: last + 1,
		OpenSteps: m.OldestOpenStep(), OpenBlocks: m.OldestOpenBlock()}
	winMS, sinceMS := window.UnixMilli(), since.UnixMilli()
	var err error
	if sc.FirstInWindow, err = m.FirstTS(ctx, src.Events, first, last, func(ts int64) bool { return ts > winMS }); err != nil {
		return nil, err
	}
	switch {
	case since.IsZero():
		if first <= last {
			sc.FirstSince = first
		}
	default:
		if sc.FirstSince, err = m.FirstTS(ctx, src.Events, first, last, func(ts int64) bool { return ts >= sinceMS }); err != nil {
			return nil, err
		}
	}
	// What the model says before the retained log does not bind it.
	if sc.OpenSteps != 0 && sc.OpenSteps < first {
		sc.OpenSteps = first
	}
	if sc.OpenBlocks != 0 && sc.OpenBlocks < first {
		sc.OpenBlocks = first
	}
	return sc, nil
}

// LoadModel is the retention model of src's log in h: its snapshot if
// trusted, then the log after it (the whole retained log without one). A
// refused snapshot's reason is returned in refused.
func LoadModel(ctx context.Context, h home.Home, src Source) (m *retention.Model, refused string, err error) {
	m = retention.New()
	if err := m.LoadSnapshot(retention.SnapshotFile(h), src.FirstSeq(), src.LastSeq(), retention.ReaderIDAt(src)); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			refused = err.Error()
		}
		m = retention.New()
	}
	return m, refused, nil
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
	// A cursor of another home says nothing of what this home's stream
	// holds: trusting its shipped seq would archive events never shipped.
	if id, err := home.ReadHomeID(h); err == nil && st.HomeID != "" {
		if err := st.CheckHome(h, id); err != nil {
			return 0, err
		}
	}
	return st.Shipped + 1, nil
}

// DefaultHolders are the built-in holders of home h, the step, block and
// window ones answering from sc, the read-models one from readModels.
func DefaultHolders(h home.Home, sc *Scan, readModels []ReadModel, indexCovered func(context.Context) (uint64, error)) []RetentionHolder {
	fixed := func(seq uint64) func(context.Context) (uint64, error) {
		return func(context.Context) (uint64, error) { return seq, nil }
	}
	return []RetentionHolder{
		{Name: "checkpoint", OldestNeededSeq: func(context.Context) (uint64, error) {
			return checkpointNeed(projections.ReadCheckpointSeq(h))
		}},
		{Name: "open steps", OldestNeededSeq: fixed(sc.OpenSteps)},
		{Name: "open terminal blocks", OldestNeededSeq: fixed(sc.OpenBlocks)},
		{Name: "auto-resume window", OldestNeededSeq: fixed(sc.FirstInWindow)},
		{Name: "ship cursor", OldestNeededSeq: func(context.Context) (uint64, error) { return unshipped(h) }},
		{Name: "read models", OldestNeededSeq: func(ctx context.Context) (uint64, error) { return readModelsNeed(ctx, h, readModels, indexCovered) }, ReadsArchive: true},
	}
}

// checkpointNeed is the oldest seq the views' checkpoint needs, from
// what projections.ReadCheckpointSeq returned.
func checkpointNeed(seq uint64, present bool, err error) (uint64, error) {
	if err != nil {
		return 0, err
	}
	if !present {
		return 1, nil // the views are rebuilt from the start
	}
	return seq + 1, nil
}

// KnownCheckpoint is what projections.ReadCheckpointSeq returned to a
// caller that has just read it (Options.Checkpoint).
type KnownCheckpoint struct {
	Seq     uint64
	Present bool
	Err     error
}

// SnapshotModel names a read model's snapshot file: its model name and
// the code version it must carry (package snapshot).
type SnapshotModel struct {
	File, Model, Version string
}

// Covers is the seq the snapshot of sm covers, read whole (CRC checked)
// and of its code version; an error when it is missing or untrusted.
func (sm SnapshotModel) Covers() (uint64, error) {
	hd, _, err := snapshot.Read(sm.File, sm.Model, sm.Version)
	return hd.Seq, err
}

// ReadModel is a read model a daemon restarts from a snapshot: Covers
// returns the seq its snapshot in h covers (an error when it has no
// trusted one). The daemon's table of them (package daemon) is passed in
// Options.ReadModels.
type ReadModel struct {
	Name   string
	Covers func(h home.Home) (uint64, error)
}

// readModelsNeed is the oldest seq a read model of ms still needs: one
// after the oldest seq a snapshot covers (the request-id index's
// included: its covered seq from indexCovered). A missing or untrusted
// snapshot needs the whole log (1), as do an empty table (a program
// without the daemon's table cannot tell what a restart needs) and a
// missing indexCovered.
func readModelsNeed(ctx context.Context, h home.Home, ms []ReadModel, indexCovered func(context.Context) (uint64, error)) (uint64, error) {
	if len(ms) == 0 {
		return 1, nil
	}
	need := uint64(math.MaxUint64)
	for _, m := range ms {
		seq, err := m.Covers(h)
		if err != nil || seq == 0 {
			return 1, nil
		}
		need = min(need, seq+1)
	}
	if indexCovered == nil {
		return 1, nil
	}
	c, err := indexCovered(ctx)
	if err != nil {
		return 0, err
	}
	if c == 0 {
		return 1, nil
	}
	return min(need, c+1), nil
}

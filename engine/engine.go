package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/reqindex"
	"github.com/cmlab/cmlab/wal"
)

// Errors of the engine.
var (
	// ErrReadOnly is returned by Append on an engine opened ReadOnly.
	ErrReadOnly = errors.New("engine: home is open read-only")
	// ErrFeedbackBusy is returned by an append that would write to
	// feedback.jsonl while another program's unfinished line ends it and
	// does not complete within Options.FeedbackWait. It wraps
	// projections.ErrFeedbackPartial.
	ErrFeedbackBusy = fmt.Errorf("engine: feedback store busy: %w", projections.ErrFeedbackPartial)
	// ErrViewsBehind wraps the cause when the views lag the log (a
	// projection failed after its events were made durable, e.g. EMFILE
	// opening a view file) and an operation that needs them current — an
	// append writing feedback.jsonl — cannot bring them up yet. It is
	// transient: nothing was appended, the log is not failed.
	ErrViewsBehind = errors.New("engine: views are behind the log")
)

// Defaults of Options.
const (
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = time.Second
	DefaultFeedbackWait       = 2 * time.Second
	catchUpBatch              = 1024
)

// Observer is in-memory state fed every event in log order: first the whole
// history when it subscribes, then each committed event. Observe must not
// block or append.
type Observer interface {
	Observe(ev *events.Event)
}

// GroupObserver is an Observer that takes each committed group of events
// (one Append's, and the others fsynced with it) in one call, so that it
// can apply them under one lock: a reader then never sees part of a group
// (a terminal block's prompt without its END).
type GroupObserver interface {
	Observer
	ObserveGroup(evs []*events.Event)
}

// ResumableObserver is an Observer whose state already covers the log up
// to Covered() (it keeps it on disk): Subscribe feeds it only the events
// after that seq.
type ResumableObserver interface {
	Observer
	Covered() uint64
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ev *events.Event)

// Observe calls f(ev).
func (f ObserverFunc) Observe(ev *events.Event) { f(ev) }

// Options configure Open.
type Options struct {
	Home home.Home
	// SegmentSize of the log; default that of wal.Options (4 MiB).
	SegmentSize int
	// NoSync skips fsync of the log and the views (benchmarks only).
	NoSync bool
	// Now is the clock for event timestamps; default time.Now.
	Now func() time.Time
	// CheckpointEvery: checkpoint after this many applied events; default
	// DefaultCheckpointEvery (1000).
	CheckpointEvery int
	// CheckpointInterval: checkpoint at most this long after the first
	// event not covered by one; default DefaultCheckpointInterval (1 s).
	CheckpointInterval time.Duration
	// FeedbackWait bounds how long an append touching feedback.jsonl waits
	// for a foreign unfinished line to be completed; default 2 s.
	FeedbackWait time.Duration
	// FeedbackSweep, when positive, ingests complete foreign lines of
	// feedback.jsonl on this period even when no feedback is appended
	// (the daemon sets it; default off: ingestion then happens before
	// each feedback write and at open).
	FeedbackSweep time.Duration
	// ReadOnly serves a home without accepting appends (a replayed home):
	// the views are still brought up to the log at open.
	ReadOnly bool
	// RebuildViews ignores the checkpoint and regenerates every view from
	// the log at open (projections.Regenerate: `cmlab rebuild` on a home
	// no daemon holds, and after a salvage changed the log). Regenerated
	// then reports what changed.
	RebuildViews bool
	// Archive is where the log's compacted (archived) segments are: a
	// regeneration of the views reads the whole log (wal.Options.Archive).
	Archive string
	// Faults, when set, injects write and fsync failures into the log
	// (fault tests of the packages above, e.g. the API's degraded mode).
	Faults *wal.Faults
	// ViewOpenFile, when set, opens the view files in place of os.OpenFile
	// (projections.Options.OpenFile): the fault seam through which tests
	// make a projection fail after its events were fsynced.
	ViewOpenFile func(name string, flag int, perm os.FileMode) (*os.File, error)
	// FS, when set, is the seam of the durable file writes of the log
	// (wal.Options.FS) and of the read models' snapshots (snapshot.Attach):
	// fault and crash tests fail or block a stage of them. Default the real
	// file system.
	FS home.FS
	// VerifyAfterOpen makes Open's cost independent of the history (the
	// daemon sets it): the checks that read every byte of the log's sealed
	// segments, of the views and of the request-id index are deferred to
	// goroutines that StartVerification starts (see "Verification after
	// open" in doc.go). Verified reports their outcome.
	VerifyAfterOpen bool
	// SealAfter: a terminal block's output view is sealed at a checkpoint
	// once its block ended or once it was not written for this many events
	// (projections.Options.SealAfter); default projections.DefaultSealAfter.
	SealAfter uint64
	// verifyHold, when set (tests), holds the verification after open back
	// until it is closed or the engine closes.
	verifyHold <-chan struct{}
	// adoptHook, when set (crash tests), is called after each append of
	// an adoption (adopt.go) with the number of appends so far;
	// adoptBatch, when positive, is the events per append.
	adoptHook  func(appends int)
	adoptBatch int
	// feedbackQueued, when set (tests), is called by the feedback combiner
	// each time it has queued a combined append of n appends to the log.
	feedbackQueued func(n int)
}

// VerifyReport is the outcome of the verification after open
// (Options.VerifyAfterOpen).
type VerifyReport struct {
	// Views lists the views whose whole-view CRC was checked.
	Views int `json:"views"`
	// Bytes is how many view bytes were read.
	Bytes int64 `json:"bytes"`
	// Damaged lists the views whose bytes differed from their checkpoint's
	// whole-view CRC; the views were then regenerated from the log.
	Damaged []string `json:"damaged,omitempty"`
	// Regenerated is the report of that regeneration, nil when none ran.
	Regenerated *projections.RegenerateReport `json:"regenerated,omitempty"`
	// Err is why the verification or the regeneration did not finish
	// (Close, a read error); the views were then marked stale, so the next
	// open regenerates them, unless the verification found nothing yet.
	Err error `json:"-"`
	// Log is the verification of the log's sealed segments; damage there
	// fails the log (Err is then its *wal.CorruptError) and the views are
	// not checked.
	Log wal.VerifyReport `json:"-"`
	// Seconds is how long it took after StartVerification.
	Seconds float64 `json:"seconds"`
}

// Engine is an open home. Safe for concurrent use.
type Engine struct {
	opts  Options
	log   *wal.Log
	proj  *projections.Projector
	regen *projections.RegenerateReport

	adopted    *AdoptReport              // adopt.go: the adoption Open did, if any
	adoptAside map[string]map[int64]bool // lines it set aside, for the regeneration

	applyMu   sync.Mutex // serialises projection, catch-up and checkpoints
	caughtUp  bool
	sinceCP   int
	firstUnCP time.Time
	cpErr     error
	// viewsErr is set when a projection failed after its events were made
	// durable: the views lag the log until a catch-up succeeds (apply and
	// the checkpoint loop retry it). appliedThrough is the last seq handed
	// to apply, projected or not.
	viewsErr       error
	appliedThrough uint64

	fbMu     sync.Mutex   // serialises appends that write feedback.jsonl (feedback_combine.go)
	fbWant   atomic.Int32 // lockFeedback callers waiting for fbMu
	fbCh     chan *feedbackAppend
	setAside []projections.SetAside // foreign feedback lines moved to quarantine/ (fbMu)

	// ids: the feedback ids the log holds, built from the whole log the
	// first time a foreign feedback line needs checking, then kept up to
	// date by apply; nil until then.
	idMu sync.Mutex
	ids  map[string]bool

	obsMu     sync.Mutex
	observers []Observer

	reqMu         sync.Mutex
	reqIdx        *reqindex.Index
	verifyStarted bool // StartVerification was called (reqMu)

	cpHooks []func(final bool) // OnCheckpoint; guarded by applyMu

	sharedMu sync.Mutex
	shared   map[string]any // Shared (shared.go)

	applied applyTimes // how long the last applies took (trace.go)

	// deferCheck: the projector being opened by openViews defers its
	// whole-view check (Options.VerifyAfterOpen).
	deferCheck bool
	verified   chan struct{} // closed when the verification after open ends
	verifyRep  VerifyReport  // set before verified is closed
	verifyGo   sync.Once     // starts the verification, or ends it unstarted at Close

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open locks and opens the home's log, repairs a torn tail, brings the
// views up to the log (catch-up, see package projections) and starts
// accepting appends. Complete lines another program appended to
// feedback.jsonl are ingested before Open returns.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if err := opts.Home.Ensure(); err != nil {
		return nil, err
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = DefaultCheckpointEvery
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.FeedbackWait <= 0 {
		opts.FeedbackWait = DefaultFeedbackWait
	}
	if opts.SealAfter == 0 {
		opts.SealAfter = projections.DefaultSealAfter
	}
	e := &Engine{opts: opts, stop: make(chan struct{}), fbCh: make(chan *feedbackAppend), verified: make(chan struct{})}
	// The log first: its lock says this process owns the home, and only
	// the owner may touch the views.
	acked, accept := AckedSeq(opts.Home)
	l, err := wal.Open(wal.Options{
		Dir:           opts.Home.WALDir(),
		QuarantineDir: opts.Home.QuarantineDir(),
		SegmentSize:   opts.SegmentSize,
		NoSync:        opts.NoSync,
		Now:           opts.Now,
		Apply:         e.apply,
		Archive:       opts.Archive,
		Faults:        opts.Faults,
		FS:            opts.FS,

		VerifyAfterOpen: opts.VerifyAfterOpen,
		Acked:           acked,
		AcceptTailLoss:  accept,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.log = l
	proj, err := e.openViews(ctx)
	if err != nil {
		l.Close()
		return nil, err
	}
	e.proj = proj
	e.deferCheck = false
	err = e.catchUp(ctx)
	if errors.Is(err, projections.ErrFeedbackDamaged) {
		// Past the checkpoint, feedback.jsonl holds a corrupt line or one
		// with an id the log holds where the log's own line belongs:
		// damage, not another program's line. Regenerate sorts it out.
		e.proj.CloseNoCheckpoint()
		if e.proj, err = e.regenerate(ctx); err == nil {
			err = e.catchUp(ctx)
		}
	}
	if err != nil {
		l.Close()
		if e.proj != nil {
			e.proj.CloseNoCheckpoint()
		}
		return nil, err
	}
	if !opts.ReadOnly {
		if err := e.IngestFeedback(ctx); err != nil {
			e.log.Close()
			e.proj.CloseNoCheckpoint()
			return nil, err
		}
		e.Checkpoint() // best effort: covers lines catch-up adopted, now ingested
	}
	e.wg.Add(1)
	go e.checkpointLoop()
	if !opts.ReadOnly {
		e.wg.Add(1)
		go e.feedbackLoop()
	}
	if opts.FeedbackSweep > 0 && !opts.ReadOnly {
		e.wg.Add(1)
		go e.sweepLoop()
	}
	return e, nil
}

// openViews finishes a view swap a crash interrupted, then opens the
// projector. The views are regenerated from the whole log
// (projections.Regenerate) instead of caught up when Options.RebuildViews
// asks for it, when feedback.jsonl holds bytes the checkpoint does not
// vouch for (writing it from empty would take the log's own damaged lines
// for another program's), when a salvage marked them stale
// (projections.MarkViewsStale) and no regeneration finished since, or when
// the checkpoint claims events the log does not hold (a log cut by
// salvage).
func (e *Engine) openViews(ctx context.Context) (*projections.Projector, error) {
	h := e.opts.Home
	if _, err := projections.FinishRegenerate(h); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.deferCheck = e.opts.VerifyAfterOpen
	// A home content-machine wrote: its lines into the log first, then
	// views regenerated from it (adopt.go).
	aside, err := e.adoptContentMachine(ctx)
	if err != nil {
		return nil, err
	}
	if aside != nil {
		e.adoptAside = aside
		return e.regenerate(ctx)
	}
	if err := e.adoptLate(ctx); err != nil {
		return nil, err
	}
	last := e.log.LastSeq()
	if !e.opts.RebuildViews && !projections.ViewsStale(h) {
		p, err := projections.Open(e.projOptions(false))
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if !p.FeedbackDamaged() && p.ReplayFrom() <= last+1 {
			return p, nil
		}
		p.CloseNoCheckpoint()
	}
	return e.regenerate(ctx)
}

// regenerate replaces the views with a rebuild from the whole log
// (projections.Regenerate) and opens a projector on them.
func (e *Engine) regenerate(ctx context.Context) (*projections.Projector, error) {
	h := e.opts.Home
	rep, err := projections.Regenerate(ctx, e.log.Events(1), h, projections.RegenerateOptions{UpTo: max(e.log.LastSeq(), 1), NoSync: e.opts.NoSync, SetAside: e.adoptAside})
	if errors.Is(err, wal.ErrCompacted) {
		return nil, fmt.Errorf("engine: the views must be regenerated from the whole log, whose start is archived: %w\n  fix: `cmlab rebuild --archive DIR` (the directory compaction archived to)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.regen = rep
	p, err := projections.Open(e.projOptions(false))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return p, nil
}

// Regenerated is the report of the view regeneration Open did (see
// Options.RebuildViews), nil when the views were caught up as usual.
func (e *Engine) Regenerated() *projections.RegenerateReport { return e.regen }

func (e *Engine) projOptions(fresh bool) projections.Options {
	return projections.Options{Home: e.opts.Home, Fresh: fresh, NoSync: e.opts.NoSync, OpenFile: e.opts.ViewOpenFile, DeferWholeCheck: e.deferCheck, SealAfter: e.opts.SealAfter}
}

// catchUp re-applies the log after the checkpoint. Appends made meanwhile
// (the log's own repair event) wait on applyMu or, if they were committed
// before it was taken, are inside the range read here.
func (e *Engine) catchUp(ctx context.Context) error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	last := e.log.LastSeq()
	if err := e.catchUpLocked(ctx, last); err != nil {
		return err
	}
	e.caughtUp = true
	e.appliedThrough = last
	if err := e.proj.Checkpoint(); err != nil && !errors.Is(err, projections.ErrIngestPending) {
		return fmt.Errorf("engine: checkpoint after catch-up: %w", err)
	}
	e.firstUnCP = time.Time{}
	return nil
}

// catchUpLocked applies the log from the projector's ReplayFrom through
// last; applyMu is held.
func (e *Engine) catchUpLocked(ctx context.Context, last uint64) error {
	if e.proj.ReplayFrom() > last+1 {
		// The checkpoint claims events the log does not hold (a log cut by
		// salvage): rebuild every view from the log instead.
		e.proj.CloseNoCheckpoint()
		p, err := projections.Open(e.projOptions(true))
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		e.proj = p
	}
	// Not max'ed with the log's first seq: on a compacted log, events
	// before it are read back from the archive (or the catch-up fails
	// with wal.ErrCompacted), never skipped.
	from := max(e.proj.ReplayFrom(), 1)
	batch := make([]*events.Event, 0, catchUpBatch)
	n := 0
	if fi, err := os.Stat(e.opts.Home.FeedbackFile()); err == nil && fi.Size() > e.proj.FeedbackEnd() && from <= last {
		// Bytes past the log's end of feedback.jsonl where re-applied
		// lines go: a line there that is corrupt or has an id the log
		// holds is damage (ErrFeedbackDamaged), never another program's.
		held, err := e.heldIDs()
		if err != nil {
			return err
		}
		e.proj.StrictForeign(held)
		defer e.proj.StrictForeign(nil)
	}
	if from <= last {
		// First pass: the foreign feedback lines the events ahead ingest,
		// so verification of feedback.jsonl recognises them in place.
		var expect []projections.ForeignLine
		for ev, err := range e.log.Events(from) {
			if err != nil {
				return fmt.Errorf("engine: catch-up: %w", err)
			}
			if ev.Seq > last {
				break
			}
			if ev.Type == events.TypeFeedbackIngested {
				if in, err := events.DecodeAs[*events.FeedbackIngested](ev); err == nil && in.Offset >= 0 {
					expect = append(expect, *in)
				}
			}
		}
		e.proj.ExpectIngested(expect)
		defer e.proj.ExpectIngested(nil)
		for ev, err := range e.log.Events(from) {
			if err != nil {
				return fmt.Errorf("engine: catch-up: %w", err)
			}
			if ev.Seq > last {
				break
			}
			batch = append(batch, ev)
			if len(batch) == cap(batch) {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := e.proj.Apply(batch); err != nil {
					return fmt.Errorf("engine: catch-up: %w", err)
				}
				n += len(batch)
				batch = batch[:0]
			}
		}
		if err := e.proj.Apply(batch); err != nil {
			return fmt.Errorf("engine: catch-up: %w", err)
		}
		n += len(batch)
	}
	return nil
}

// recoverViewsLocked brings views that lag the log (viewsErr set) up to
// it: the failed projector is closed without a checkpoint and reopened,
// which cuts every view back to the last checkpoint exactly as after a
// crash, and the log is re-applied from there. It catches up only when
// every event handed to apply is readable from the log (LastSeq equals
// appliedThrough), so no event can be skipped. applyMu is held. On
// failure viewsErr keeps the newest cause and a later call retries.
func (e *Engine) recoverViewsLocked() {
	if e.viewsErr == nil || e.log.LastSeq() != e.appliedThrough || e.log.Err() != nil {
		return
	}
	e.proj.CloseNoCheckpoint()
	p, err := projections.Open(e.projOptions(false))
	if err != nil {
		e.viewsErr = fmt.Errorf("reopening the views: %w", err)
		return
	}
	e.proj = p
	if err := e.catchUpLocked(context.Background(), e.appliedThrough); err != nil {
		e.viewsErr = err
		return
	}
	e.viewsErr = nil
	e.sinceCP = 0
	e.checkpointLocked()
}

// apply is the log's Apply hook: it runs in the committer after the fsync
// and before the appenders are acknowledged. It never fails the log: the
// events are durable, so a projection error (a view file that cannot be
// opened for lack of descriptors, a foreign unfinished feedback line)
// leaves the views behind the log (ViewsErr) and the append is
// acknowledged; the views catch up at the next apply or checkpoint tick.
// Observers are fed in every case.
func (e *Engine) apply(evs []*events.Event) error {
	start := time.Now()
	e.applyMu.Lock()
	if !e.caughtUp {
		// Committed during Open, before catch-up: catch-up reads it.
		e.applyMu.Unlock()
		return nil
	}
	if len(evs) == 0 {
		e.applyMu.Unlock()
		return nil
	}
	for _, ev := range evs {
		e.addIDs(ev) // the log holds them, projected or not
	}
	if e.viewsErr != nil {
		e.recoverViewsLocked()
	}
	if e.viewsErr == nil {
		if err := e.proj.Apply(evs); err != nil {
			e.viewsErr = fmt.Errorf("projecting seq %d–%d: %w", evs[0].Seq, evs[len(evs)-1].Seq, err)
		} else {
			if e.sinceCP == 0 {
				e.firstUnCP = time.Now()
			}
			e.sinceCP += len(evs)
			if e.sinceCP >= e.opts.CheckpointEvery || time.Since(e.firstUnCP) >= e.opts.CheckpointInterval {
				e.checkpointLocked()
			}
		}
	}
	e.appliedThrough = evs[len(evs)-1].Seq
	e.applyMu.Unlock()

	e.obsMu.Lock()
	for _, o := range e.observers {
		if g, ok := o.(GroupObserver); ok {
			g.ObserveGroup(evs)
			continue
		}
		for _, ev := range evs {
			o.Observe(ev)
		}
	}
	e.obsMu.Unlock()
	e.applied.add(evs[0].Seq, evs[len(evs)-1].Seq, time.Since(start))
	return nil
}

// checkpointLocked writes a checkpoint; applyMu is held. A failure is kept
// in CheckpointErr and retried at the next occasion: the log stays the
// source of truth, so a missed checkpoint only lengthens the next catch-up.
func (e *Engine) checkpointLocked() {
	if e.viewsErr != nil {
		return // no checkpoint may cover views that lag the log
	}
	if err := e.proj.Checkpoint(); err != nil {
		e.cpErr = err
		return
	}
	e.cpErr = nil
	e.sinceCP = 0
	for _, f := range e.cpHooks {
		f(false)
	}
}

// OnCheckpoint registers f, called after every successful checkpoint
// (final false) and once more at Close after the last one (final true):
// the moment for read models to write their snapshots. f runs while
// appends wait, so it must be quick or decide to skip; it must not append.
func (e *Engine) OnCheckpoint(f func(final bool)) {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	e.cpHooks = append(e.cpHooks, f)
}

func (e *Engine) checkpointLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.applyMu.Lock()
			if e.viewsErr != nil {
				e.recoverViewsLocked()
			}
			if e.sinceCP > 0 && e.log.Err() == nil {
				e.checkpointLocked()
			}
			e.applyMu.Unlock()
		}
	}
}

// lifeContext is a context that ends when the engine stops (Close), for
// work bounded by the engine's life rather than by one caller's; cancel
// releases it earlier.
func (e *Engine) lifeContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (e *Engine) sweepLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.opts.FeedbackSweep)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-e.stop; cancel() }()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			if e.log.Err() == nil {
				e.IngestFeedback(ctx) // best effort; the next sweep retries
			}
		}
	}
}

// Checkpoint makes the views durable and records them in
// state/checkpoint.json now.
func (e *Engine) Checkpoint() error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if e.viewsErr != nil {
		return fmt.Errorf("%w: %w", ErrViewsBehind, e.viewsErr)
	}
	e.checkpointLocked()
	return e.cpErr
}

// ViewsErr is non-nil while the views lag the log: the cause of the
// projection failure (wrapping ErrViewsBehind). Every acknowledged event
// is in the log; the views catch up without a restart once the cause is
// gone.
func (e *Engine) ViewsErr() error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if e.viewsErr == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrViewsBehind, e.viewsErr)
}

// viewsCurrent tries to bring lagging views up to the log and reports
// ErrViewsBehind if they still lag. Appends that write feedback.jsonl call
// it first: the foreign-line check needs the end the log accounts for.
func (e *Engine) viewsCurrent() error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if e.viewsErr == nil {
		return nil
	}
	e.recoverViewsLocked()
	if e.viewsErr != nil {
		return fmt.Errorf("%w: %w", ErrViewsBehind, e.viewsErr)
	}
	return nil
}

// CheckpointErr is the error of the last failed checkpoint, nil once one
// succeeds again.
func (e *Engine) CheckpointErr() error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	return e.cpErr
}

// Subscribe feeds o the whole log so far (for a ResumableObserver, the log
// after its Covered seq), then every new event. No append is applied while
// the history is replayed, so o sees each event once.
func (e *Engine) Subscribe(o Observer) error {
	e.obsMu.Lock()
	defer e.obsMu.Unlock()
	from := uint64(1)
	if r, ok := o.(ResumableObserver); ok {
		from = r.Covered() + 1
	}
	for ev, err := range e.log.Events(from) {
		if err != nil {
			return err
		}
		o.Observe(ev)
	}
	e.observers = append(e.observers, o)
	return nil
}

// RequestIndex is the home's request-id index (state/reqindex.db), opened,
// brought up to the log and subscribed at the first call; Close closes it.
// With Options.RebuildViews it is rebuilt from the log, unless the log was
// compacted (the index may then be the only copy of old answers; archived
// segments are read back, but a missing archive must not cost it). A file
// that cannot be trusted is rebuilt: Rebuilt() on the index says why.
func (e *Engine) RequestIndex(ctx context.Context) (*reqindex.Index, error) {
	e.reqMu.Lock()
	defer e.reqMu.Unlock()
	if e.reqIdx != nil {
		return e.reqIdx, nil
	}
	x, err := reqindex.Open(ctx, reqindex.Options{Path: e.opts.Home.RequestIndexFile(), Log: e.log,
		Rebuild: e.opts.RebuildViews && e.log.FirstSeq() <= 1, NoSync: e.opts.NoSync, VerifyAfterOpen: e.opts.VerifyAfterOpen})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if err := e.Subscribe(x); err != nil {
		x.Close()
		return nil, fmt.Errorf("engine: request index: %w", err)
	}
	e.reqIdx = x
	if e.verifyStarted {
		x.StartVerification()
	}
	return x, nil
}

// Append makes evs durable and projected, then returns their sequences.
// An append that writes to feedback.jsonl first ingests the complete lines
// other programs appended there (feedback.ingested events in the same
// commit group, ahead of evs); if an unfinished foreign line ends the file,
// it waits up to Options.FeedbackWait for it, then fails with
// ErrFeedbackBusy and appends nothing.
func (e *Engine) Append(ctx context.Context, evs ...*events.Event) ([]uint64, error) {
	if e.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if !touchesFeedback(evs) {
		seqs, err := e.log.Append(ctx, evs...)
		e.traceAppend(ctx, seqs)
		return seqs, err
	}
	r := &feedbackAppend{ctx: ctx, evs: evs, done: make(chan feedbackResult, 1)}
	select {
	case e.fbCh <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.stop:
		return nil, wal.ErrClosed
	}
	res := <-r.done
	e.traceAppend(ctx, res.seqs)
	return res.seqs, res.err
}

// Log is the underlying log, for readers.
func (e *Engine) Log() *wal.Log { return e.log }

// Home is the engine's home directory.
func (e *Engine) Home() home.Home { return e.opts.Home }

// FS is the seam of the home's durable file writes (Options.FS; nil:
// the real file system).
func (e *Engine) FS() home.FS { return e.opts.FS }

// ReadOnly reports whether the engine refuses appends.
func (e *Engine) ReadOnly() bool { return e.opts.ReadOnly }

// Err is the log's failed-state cause, or nil when writes are durable.
func (e *Engine) Err() error { return e.log.Err() }

// Close stops appends, then checkpoints and closes the views and the log.
// After a failed log the views are closed without a new checkpoint.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.close() })
	return e.closeErr
}

func (e *Engine) close() error {
	close(e.stop)
	e.wg.Wait()
	e.verifyGo.Do(func() { e.verifyRep.Err = wal.ErrClosed; close(e.verified) })
	err := e.log.Close()
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	var perr error
	if e.log.Err() != nil || e.viewsErr != nil {
		// Views behind the log are cut back to the checkpoint at the next
		// open and caught up there, like after a crash.
		perr = e.proj.CloseNoCheckpoint()
	} else {
		perr = e.proj.Close()
		for _, f := range e.cpHooks {
			f(true)
		}
	}
	if err == nil {
		err = perr
	}
	e.reqMu.Lock()
	if e.reqIdx != nil {
		// After the log: no event can reach it any more.
		if xerr := e.reqIdx.Close(); err == nil {
			err = xerr
		}
	}
	e.reqMu.Unlock()
	return err
}

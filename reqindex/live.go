package reqindex

import (
	"context"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
)

// Live is the writing side of an open derived file (this index; the Lab
// store of package labapi) once it has caught up with the log: the
// owner's Observe puts each event's change in a pending batch (P); a
// flusher goroutine writes the batch and the covered seq in one
// transaction every FlushInterval or FlushAt changes, while the next
// batch fills; past MaxPending changes Observe waits for it
// (back-pressure on the log's committer) unless the file cannot be
// written. It also holds the check after open (one goroutine that Close
// ends), the rebuild from the log beside the serving file and its swap,
// and Close's order: stop the flusher, end the check, write what is
// pending, close the file. The owner keeps its open file (and the lock
// its readers take) and says how to write a batch to it, how to put a
// rebuilt file in its place and how to close it (LiveOptions).
type Live[P Pending[P]] struct {
	o LiveOptions[P]

	verified  chan struct{} // closed when the check after open ends
	verifyErr error         // its outcome, set before verified is closed
	verifyGo  sync.Once     // starts the check, or ends it unstarted

	mu         sync.Mutex
	drained    *sync.Cond // signalled after each flush
	pending    P
	flushing   P // what a flush is writing, while isFlushing
	isFlushing bool
	observed   uint64 // last seq fed to Observe (or caught up at open)
	observedID string
	covered    uint64 // seq durable in the file
	flushErr   error
	rebuilt    string
	closed     bool

	kick chan struct{}
	// life ends when Close begins (stop): the flusher, the check after
	// open and a rebuild end with it.
	life context.Context
	stop context.CancelFunc
	done chan struct{} // closed when the flusher has returned
}

// Pending is a batch of changes not yet in the file.
type Pending[P any] interface {
	// Len is the number of changes (FlushAt and MaxPending count them).
	Len() int
	// Before is the changes of this batch followed by those of newer, as
	// one batch (a failed flush's batch put back in front of what was
	// observed meanwhile); it may reuse either.
	Before(newer P) P
}

// LiveOptions configure StartLive.
type LiveOptions[P Pending[P]] struct {
	// File is the file as a derived file of the log: its Name, Hook
	// (PhaseFlushWrite, PhaseFlushed) and the rebuild.
	File *DerivedFile
	// Path is the file's (a rebuild is made beside it).
	Path string
	// FlushInterval, FlushAt and MaxPending: see Live.
	FlushInterval time.Duration
	FlushAt       int
	MaxPending    int
	// NewPending makes an empty batch.
	NewPending func() P
	// Write stores the batch and the covered seq and id in one
	// transaction of the open file. It is never called while Install
	// runs.
	Write func(p P, seq uint64, id string) error
	// WriteFailed, if not nil, is called after a failed Write (the batch
	// is back in front of the pending changes, to be written again).
	WriteFailed func(err error)
	// Install puts a rebuilt file in place of the open one and closes the
	// old one. It runs holding Live's lock (no flush writes meanwhile), so
	// nothing that holds what Install waits for (the owner's lock around
	// its file) may wait for Live's (State, Observe, Locked).
	Install func(db *bolt.DB)
	// CloseFile closes the open file (Close, after the last flush).
	CloseFile func() error
	// ErrClosed is the error of a flush or rebuild after Close.
	ErrClosed error
	// WriteAfterCheck holds every write until the check after open has
	// ended (StartVerification, or NoVerification): bbolt writing over a
	// damaged page could panic. Meanwhile changes stay pending.
	WriteAfterCheck bool
}

// The phases of a flush that DerivedFile.Hook is called at.
const (
	PhaseFlushWrite = "flush-write" // a flush about to write its batch
	PhaseFlushed    = "flushed"     // a flush's transaction committed, covered not yet moved
)

// StartLive starts the flusher of a file caught up to covered (the seq
// and id of the last event it holds; rebuilt: why the file found at open
// was not trusted, "" if it was).
func StartLive[P Pending[P]](o LiveOptions[P], covered uint64, coveredID, rebuilt string) *Live[P] {
	l := &Live[P]{o: o, verified: make(chan struct{}), pending: o.NewPending(),
		observed: covered, observedID: coveredID, covered: covered, rebuilt: rebuilt,
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	l.drained = sync.NewCond(&l.mu)
	l.life, l.stop = context.WithCancel(context.Background())
	go l.flushLoop()
	return l
}

// Observe advances the observed seq to ev's and calls add with the
// pending batch (and the one a flush is writing, if any, else the zero P)
// to put ev's change in it; add reports whether it did. An event at or
// below the observed seq, or after Close, is ignored: the log holds it.
func (l *Live[P]) Observe(ev *events.Event, add func(pending, flushing P) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || (ev.Seq != 0 && ev.Seq <= l.observed) {
		return
	}
	if ev.Seq != 0 {
		l.observed, l.observedID = ev.Seq, ev.ID
	}
	if !add(l.pending, l.flushing) {
		return
	}
	if l.pending.Len() >= l.o.FlushAt {
		l.kickFlush()
	}
	// Back-pressure: the heap holds at most MaxPending changes, unless
	// the file cannot be written (then the log still has them).
	for l.pending.Len() >= l.o.MaxPending && l.flushErr == nil && !l.closed {
		l.kickFlush()
		l.drained.Wait()
	}
}

func (l *Live[P]) kickFlush() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Unstored calls find with the pending batch, then, unless it returns
// true, with the one a flush is writing: the changes not yet in the
// file. closed reports Close (find is called all the same).
func (l *Live[P]) Unstored(find func(p P) bool) (closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !find(l.pending) && l.isFlushing {
		find(l.flushing)
	}
	return l.closed
}

// LiveState is what a Live knows at one moment.
type LiveState struct {
	// Observed is the last seq observed (or caught up at open): an engine
	// subscribing the file feeds only the events after it.
	Observed uint64
	// Durable is the seq the file on disk covers.
	Durable uint64
	// Unflushed is the number of changes held in memory, not yet on
	// disk; Flushing, that a flush is writing some of them.
	Unflushed int
	Flushing  bool
	// Err is the error of the last failed flush, nil once one succeeds.
	Err error
	// Rebuilt is why the file found was not trusted, at open or by a
	// rebuild since ("" when it was trusted or there was none).
	Rebuilt string
	// Closed reports Close.
	Closed bool
}

// State is what l knows now.
func (l *Live[P]) State() LiveState {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.pending.Len()
	if l.isFlushing {
		n += l.flushing.Len()
	}
	return LiveState{Observed: l.observed, Durable: l.covered, Unflushed: n, Flushing: l.isFlushing,
		Err: l.flushErr, Rebuilt: l.rebuilt, Closed: l.closed}
}

// Locked calls fn with the lock that Close takes to mark the file
// closed: what fn starts while closed is false, Close's CloseFile runs
// after.
func (l *Live[P]) Locked(fn func(closed bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(l.closed)
}

// Flush writes the pending changes and the observed seq to the file now
// (with WriteAfterCheck, once the check after open has ended).
func (l *Live[P]) Flush() error {
	if l.o.WriteAfterCheck {
		select {
		case <-l.verified:
		case <-l.life.Done():
		}
	}
	return l.flush()
}

func (l *Live[P]) flush() error {
	l.mu.Lock()
	for l.isFlushing { // another flush is writing
		l.drained.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		return l.o.ErrClosed
	}
	if l.pending.Len() == 0 && l.observed == l.covered {
		err := l.flushErr
		l.mu.Unlock()
		return err
	}
	l.flushing, l.pending, l.isFlushing = l.pending, l.o.NewPending(), true
	seq, id := l.observed, l.observedID
	l.mu.Unlock()

	l.o.File.hook(PhaseFlushWrite)
	err := l.o.Write(l.flushing, seq, id)
	if err == nil {
		l.o.File.hook(PhaseFlushed)
	}

	l.mu.Lock()
	if err != nil {
		l.pending = l.flushing.Before(l.pending) // older than anything pending
	} else {
		l.covered = seq
	}
	var none P
	l.flushing, l.isFlushing = none, false
	l.flushErr = err
	l.drained.Broadcast()
	l.mu.Unlock()
	if err != nil && l.o.WriteFailed != nil {
		l.o.WriteFailed(err)
	}
	return err
}

func (l *Live[P]) flushLoop() {
	defer close(l.done)
	if l.o.WriteAfterCheck {
		select {
		case <-l.verified:
		case <-l.life.Done():
			return
		}
	}
	t := time.NewTicker(l.o.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-l.life.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
		l.flush() // a failure is kept in Err and retried next time
	}
}

// StartVerification runs check (the check after open, and whatever it
// does about a failure) in a goroutine; ctx ends when Close begins, and
// Close waits for check to return. Later calls, and calls after
// NoVerification, do nothing.
func (l *Live[P]) StartVerification(check func(ctx context.Context) error) {
	l.verifyGo.Do(func() {
		go func() {
			defer close(l.verified)
			l.verifyErr = check(l.life)
		}()
	})
}

// NoVerification ends the check after open unstarted: there is nothing
// to check (a file made new).
func (l *Live[P]) NoVerification() {
	l.verifyGo.Do(func() { close(l.verified) })
}

// Verified returns a channel closed when the check after open has ended
// (at once after NoVerification, at Close when it never started) and
// its outcome: what check returned, or ErrClosed when it never ran.
func (l *Live[P]) Verified() (<-chan struct{}, func() error) {
	return l.verified, func() error {
		<-l.verified
		return l.verifyErr
	}
}

// Rebuild rebuilds the file from the log into a new file beside the
// serving one (Path + ".rebuild") while the owner serves from the old
// one, then, with no flush writing, writes the changes flushed
// meanwhile, puts the new file in place (rename, directory fsync;
// Install) and records reason (Rebuilt). A failed directory fsync leaves
// the new file in place but its rename may not survive a crash: it is
// returned as dirSync and kept as the flush error until a flush
// succeeds (the old file's flush error goes with it). err is why no new
// file was put in place.
func (l *Live[P]) Rebuild(reason string) (dirSync, err error) {
	ctx := l.life
	l.mu.Lock()
	upTo := l.covered
	l.mu.Unlock()
	r, err := l.o.File.StartRebuild(ctx, l.o.Path, upTo)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.isFlushing {
		l.drained.Wait()
	}
	if l.closed {
		r.Abort()
		return nil, l.o.ErrClosed
	}
	// Flushed since upTo: in the log (covered ≤ observed ≤ its last seq).
	db, err := r.Finish(ctx, l.covered)
	if db == nil {
		return nil, err
	}
	l.o.Install(db)
	l.rebuilt = reason
	l.flushErr = err
	return err, nil
}

// Close stops the flusher, ends the check after open (waiting for it),
// writes what is pending and closes the file (CloseFile). The first
// error is returned.
func (l *Live[P]) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	l.stop()
	<-l.done
	l.verifyGo.Do(func() { l.verifyErr = l.o.ErrClosed; close(l.verified) })
	<-l.verified
	err := l.flush()
	l.mu.Lock()
	l.closed = true
	l.drained.Broadcast()
	l.mu.Unlock()
	if cerr := l.o.CloseFile(); err == nil {
		err = cerr
	}
	return err
}

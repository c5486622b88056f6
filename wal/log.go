package wal

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync"
	"time"

	"github.com/cmlab/cmlab/events"
	twal "github.com/tidwall/wal"
)

// Errors of the log's life cycle.
var (
	// ErrFailed wraps the cause once a write or fsync failed; the log must be reopened.
	ErrFailed = errors.New("wal: log failed")
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = errors.New("wal: log closed")
	// ErrLocked is returned when another process holds the log's LOCK.
	ErrLocked = errors.New("wal: log locked")
	// ErrNotFound is returned by Read for a sequence outside the log.
	ErrNotFound = errors.New("wal: not found")
)

// Options configure Open. The zero value of every field is a sane default.
type Options struct {
	// Dir is the log directory (home/wal). Required.
	Dir string
	// QuarantineDir receives bytes cut by tail repair (home/quarantine).
	QuarantineDir string
	// SegmentSize is the target size of a segment file. Default 20 MiB.
	SegmentSize int
	// MaxBatch caps the events of one group commit. Default 4096.
	MaxBatch int
	// NoSync skips fsync. Only for benchmarks of the non-durable path.
	NoSync bool
	// Apply is called by the committer with each group's events after they
	// are durable and before any appender is acknowledged. An error puts
	// the log into its failed state.
	Apply func(evs []*events.Event) error
	// Now is the clock for ts. Default time.Now.
	Now func() time.Time
}

// Log is an open, writable log. It is safe for concurrent use.
type Log struct {
	opts Options
	tw   *twal.Log

	mu      sync.Mutex // guards failed, closed, last
	failed  error
	closed  bool
	first   uint64
	last    uint64
	changed chan struct{} // closed and replaced whenever last grows

	reqs chan *appendReq
	done chan struct{}
	wg   sync.WaitGroup
}

type appendReq struct {
	evs  []*events.Event
	resp chan appendResp
}

type appendResp struct {
	seqs []uint64
	err  error
}

// Open opens (creating if needed) the log in opts.Dir.
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("wal: Options.Dir is required")
	}
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = 20 << 20
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 4096
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	tw, err := twal.Open(opts.Dir, &twal.Options{NoSync: true, SegmentSize: opts.SegmentSize, DirPerms: 0o700, FilePerms: 0o600, NoCopy: true})
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
	}
	l := &Log{opts: opts, tw: tw, changed: make(chan struct{}), reqs: make(chan *appendReq, 1024), done: make(chan struct{})}
	l.first, _ = tw.FirstIndex()
	l.last, _ = tw.LastIndex()
	if l.last == 0 {
		l.first = 1
	}
	l.wg.Add(1)
	go l.commitLoop()
	return l, nil
}

// FirstSeq is the sequence of the first entry (1 for a new log).
func (l *Log) FirstSeq() uint64 { l.mu.Lock(); defer l.mu.Unlock(); return l.first }

// LastSeq is the sequence of the last durable entry, 0 when empty.
func (l *Log) LastSeq() uint64 { l.mu.Lock(); defer l.mu.Unlock(); return l.last }

// Err returns the cause of the failed state, or nil.
func (l *Log) Err() error { l.mu.Lock(); defer l.mu.Unlock(); return l.failed }

// Changed returns a channel closed the next time LastSeq grows.
func (l *Log) Changed() <-chan struct{} { l.mu.Lock(); defer l.mu.Unlock(); return l.changed }

// Append makes evs durable, in order, and returns their sequences. It sets
// Seq, and TS when zero. It returns only after the bytes are fsynced and
// Options.Apply has run.
func (l *Log) Append(ctx context.Context, evs ...*events.Event) ([]uint64, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	r := &appendReq{evs: evs, resp: make(chan appendResp, 1)}
	select {
	case l.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, ErrClosed
	}
	// Once queued, the outcome is awaited even if ctx ends: the caller must
	// not believe an append failed that may become durable.
	res := <-r.resp
	return res.seqs, res.err
}

func (l *Log) commitLoop() {
	defer l.wg.Done()
	var batch twal.Batch
	for {
		var group []*appendReq
		select {
		case r := <-l.reqs:
			group = append(group, r)
		case <-l.done:
			l.drain(ErrClosed)
			return
		}
		n := len(group[0].evs)
	collect:
		for n < l.opts.MaxBatch {
			select {
			case r := <-l.reqs:
				group = append(group, r)
				n += len(r.evs)
			default:
				break collect
			}
		}
		l.commit(&batch, group)
	}
}

func (l *Log) drain(err error) {
	for {
		select {
		case r := <-l.reqs:
			r.resp <- appendResp{err: err}
		default:
			return
		}
	}
}

func (l *Log) commit(batch *twal.Batch, group []*appendReq) {
	l.mu.Lock()
	failed := l.failed
	next := l.last + 1
	l.mu.Unlock()
	fail := func(err error) {
		for _, r := range group {
			r.resp <- appendResp{err: err}
		}
	}
	if failed != nil {
		fail(failed)
		return
	}
	batch.Clear()
	now := l.opts.Now().UnixMilli()
	var all []*events.Event
	seq := next
	for _, r := range group {
		for _, ev := range r.evs {
			ev.Seq = seq
			if ev.TS == 0 {
				ev.TS = now
			}
			b, err := EncodeEntry(ev)
			if err != nil {
				// A payload that cannot be encoded fails its own request only;
				// nothing of the group has been written yet.
				fail(fmt.Errorf("wal: encode seq %d: %w", seq, err))
				return
			}
			batch.Write(seq, b)
			all = append(all, ev)
			seq++
		}
	}
	if err := l.tw.WriteBatch(batch); err != nil {
		l.setFailed(fmt.Errorf("%w: write: %v", ErrFailed, err))
		fail(l.Err())
		return
	}
	if !l.opts.NoSync {
		if err := l.tw.Sync(); err != nil {
			l.setFailed(fmt.Errorf("%w: fsync: %v", ErrFailed, err))
			fail(l.Err())
			return
		}
	}
	if l.opts.Apply != nil {
		if err := l.opts.Apply(all); err != nil {
			l.setFailed(fmt.Errorf("%w: apply: %v", ErrFailed, err))
			fail(l.Err())
			return
		}
	}
	l.mu.Lock()
	l.last = seq - 1
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	s := next
	for _, r := range group {
		seqs := make([]uint64, len(r.evs))
		for i := range seqs {
			seqs[i] = s
			s++
		}
		r.resp <- appendResp{seqs: seqs}
	}
}

func (l *Log) setFailed(err error) {
	l.mu.Lock()
	if l.failed == nil {
		l.failed = err
	}
	l.mu.Unlock()
}

// Read returns the event at seq.
func (l *Log) Read(seq uint64) (*events.Event, error) {
	if seq == 0 || seq > l.LastSeq() || seq < l.FirstSeq() {
		return nil, fmt.Errorf("%w: seq %d", ErrNotFound, seq)
	}
	b, err := l.tw.Read(seq)
	if err != nil {
		return nil, fmt.Errorf("wal: read seq %d: %w", seq, err)
	}
	return DecodeEntry(b, seq)
}

// Events iterates over the events from seq from up to the LastSeq at the
// time of the call. An error ends the iteration.
func (l *Log) Events(from uint64) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		if from < l.FirstSeq() {
			from = l.FirstSeq()
		}
		last := l.LastSeq()
		for s := from; s <= last; s++ {
			ev, err := l.Read(s)
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Close stops the committer (pending appends fail with ErrClosed) and closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.done)
	l.wg.Wait()
	return l.tw.Close()
}

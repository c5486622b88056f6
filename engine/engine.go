package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// Observer is in-memory state fed every event in log order: first the whole
// history when it subscribes, then each committed event. Observe must not
// block or append.
type Observer interface {
	Observe(ev *events.Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ev *events.Event)

// Observe calls f(ev).
func (f ObserverFunc) Observe(ev *events.Event) { f(ev) }

// Options configure Open.
type Options struct {
	Home home.Home
	// SegmentSize of the log; default 20 MiB.
	SegmentSize int
	// NoSync skips fsync (benchmarks only).
	NoSync bool
	// Now is the clock for event timestamps; default time.Now.
	Now func() time.Time
}

// Engine is an open home. Safe for concurrent use.
type Engine struct {
	opts Options
	log  *wal.Log
	proj *projections.Projector

	obsMu     sync.Mutex
	observers []Observer
}

// Open locks and opens the home's log, repairs a torn tail, brings the
// views up to the log and starts accepting appends.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if err := opts.Home.Ensure(); err != nil {
		return nil, err
	}
	e := &Engine{opts: opts, proj: projections.New(opts.Home)}
	l, err := wal.Open(wal.Options{
		Dir:           opts.Home.WALDir(),
		QuarantineDir: opts.Home.QuarantineDir(),
		SegmentSize:   opts.SegmentSize,
		NoSync:        opts.NoSync,
		Now:           opts.Now,
		Apply:         e.apply,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.log = l
	return e, nil
}

func (e *Engine) apply(evs []*events.Event) error {
	if err := e.proj.Apply(evs); err != nil {
		return err
	}
	e.obsMu.Lock()
	defer e.obsMu.Unlock()
	for _, ev := range evs {
		for _, o := range e.observers {
			o.Observe(ev)
		}
	}
	return nil
}

// Subscribe feeds o the whole log so far, then every new event. No append
// is applied while the history is replayed, so o sees each event once.
func (e *Engine) Subscribe(o Observer) error {
	e.obsMu.Lock()
	defer e.obsMu.Unlock()
	for ev, err := range e.log.Events(1) {
		if err != nil {
			return err
		}
		o.Observe(ev)
	}
	e.observers = append(e.observers, o)
	return nil
}

// Append makes evs durable and projected, then returns their sequences.
func (e *Engine) Append(ctx context.Context, evs ...*events.Event) ([]uint64, error) {
	return e.log.Append(ctx, evs...)
}

// Log is the underlying log, for readers.
func (e *Engine) Log() *wal.Log { return e.log }

// Home is the engine's home directory.
func (e *Engine) Home() home.Home { return e.opts.Home }

// Err is the log's failed-state cause, or nil when writes are durable.
func (e *Engine) Err() error { return e.log.Err() }

// Close stops appends, checkpoints and closes the log and views.
func (e *Engine) Close() error {
	err := e.log.Close()
	if perr := e.proj.Close(); err == nil {
		err = perr
	}
	return err
}

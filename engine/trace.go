package engine

import (
	"context"
	"sync"
	"time"
)

// AppendTrace receives what an Append spent where, for the stage
// breakdown of an acknowledged request (`cmlab bench api`). An Append
// whose context carries one (WithAppendTrace) fills it before returning;
// without one nothing is measured but the apply times below.
type AppendTrace struct {
	// Project is how long the apply of the commit group holding the
	// append's last event took (the views and the observers, the
	// request-id index among them): the acknowledgement waited for it
	// after the fsync.
	Project time.Duration
}

type appendTraceKey struct{}

// WithAppendTrace returns ctx carrying t for the Appends made with it.
func WithAppendTrace(ctx context.Context, t *AppendTrace) context.Context {
	return context.WithValue(ctx, appendTraceKey{}, t)
}

func appendTraceOf(ctx context.Context) *AppendTrace {
	t, _ := ctx.Value(appendTraceKey{}).(*AppendTrace)
	return t
}

// applyTimes remembers how long the last applies took, by the sequences
// they covered, so that an Append can learn the projection time of its
// own commit group once the log answered it.
type applyTimes struct {
	mu   sync.Mutex
	recs [32]applyTime
	next int
}

type applyTime struct {
	first, last uint64
	d           time.Duration
}

func (a *applyTimes) add(first, last uint64, d time.Duration) {
	a.mu.Lock()
	a.recs[a.next%len(a.recs)] = applyTime{first, last, d}
	a.next++
	a.mu.Unlock()
}

// of is the apply time of the group that held seq (0 if it is no longer
// remembered).
func (a *applyTimes) of(seq uint64) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.recs {
		if r.first <= seq && seq <= r.last {
			return r.d
		}
	}
	return 0
}

// traceAppend fills the AppendTrace ctx may carry for an append that got seqs.
func (e *Engine) traceAppend(ctx context.Context, seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	if t := appendTraceOf(ctx); t != nil {
		t.Project = e.applied.of(seqs[len(seqs)-1])
	}
}

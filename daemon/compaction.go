package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/retention"
)

// DefaultCompactEvery is how often the daemon's compaction policy runs.
const DefaultCompactEvery = time.Hour

// startCompaction runs the compaction policy o.Compaction on eng's log
// every o.CompactEvery in a goroutine it owns; the returned function
// stops it and waits for it (before the engine closes).
func startCompaction(ctx context.Context, eng *engine.Engine, m *retention.Model, o Options, lab *atomic.Pointer[labapi.Server]) (stop func()) {
	every := o.CompactEvery
	if every <= 0 {
		every = DefaultCompactEvery
	}
	opts := *o.Compaction
	opts.Home = eng.Home()
	opts.Model = m
	opts.ReadModels = ReadModels()
	for i := range opts.ReadModels {
		if opts.ReadModels[i].Name == "labstore" {
			// This process holds the store's file: its server says what
			// the file covers (none yet: the whole log is kept).
			opts.ReadModels[i].Covers = func(h home.Home) (uint64, error) {
				if srv := lab.Load(); srv != nil {
					return srv.LabStoreCovered(h)
				}
				return 0, errors.New("the Lab store is not open yet")
			}
		}
	}
	opts.IndexCovered = func(ctx context.Context) (uint64, error) {
		x, err := eng.RequestIndex(ctx)
		if err != nil {
			return 0, err
		}
		return x.Covered(), nil
	}
	if opts.ResumeWindow <= 0 {
		opts.ResumeWindow = o.Lookback
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		compact.Loop(ctx, eng.Log(), opts, every, func(rep compact.Report, err error) {
			logCompaction(o.Logger, rep, err)
		})
	}()
	return func() { cancel(); wg.Wait() }
}

func logCompaction(l *slog.Logger, rep compact.Report, err error) {
	if err != nil {
		l.Warn("compaction failed; retried at the next run", "err", err)
		return
	}
	if len(rep.Segments) == 0 {
		l.Debug("compaction: nothing to remove", "oldest_needed_seq", rep.Needed, "held_by", rep.HeldBy)
		return
	}
	l.Info("compaction", "segments", len(rep.Segments), "bytes", rep.Bytes, "archive", rep.Archive,
		"first_seq", rep.NewFirstSeq, "oldest_needed_seq", rep.Needed, "held_by", rep.HeldBy)
}

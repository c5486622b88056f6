package daemon

import (
	"context"
	"sync"

	"github.com/cmlab/cmlab/labapi"
)

// Started is a daemon that Start runs in a goroutine of this process (the
// benchmarks and `cmlab demo`), once it is ready.
type Started struct {
	Info labapi.DaemonInfo // what state/daemon.json says
	Home *Home             // the home Open built: its engine and server

	cancel context.CancelFunc
	done   chan error
	stop   sync.Once
	err    error
}

// Start runs Run(ctx, o) in a goroutine and returns once the daemon is
// ready (it listens and state/daemon.json is written), or Run's error if
// it ends before that, or ctx's. o.Ready and o.Opened, when set, are
// still called.
func Start(ctx context.Context, o Options) (*Started, error) {
	dctx, cancel := context.WithCancel(ctx)
	s := &Started{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan labapi.DaemonInfo, 1)
	opened, wasReady := o.Opened, o.Ready
	o.Opened = func(h *Home) {
		s.Home = h // read by the caller after ready: the channel orders it
		if opened != nil {
			opened(h)
		}
	}
	o.Ready = func(info labapi.DaemonInfo) {
		if wasReady != nil {
			wasReady(info)
		}
		ready <- info
	}
	go func() { s.done <- Run(dctx, o) }()
	select {
	case s.Info = <-ready:
		return s, nil
	case err := <-s.done:
		cancel()
		return nil, err
	case <-ctx.Done():
		cancel()
		<-s.done
		return nil, ctx.Err()
	}
}

// Stop stops the daemon as SIGTERM stops `cmlab serve` and returns Run's
// error (nil for a clean stop); later calls return the same.
func (s *Started) Stop() error {
	s.stop.Do(func() {
		s.cancel()
		s.err = <-s.done
	})
	return s.err
}

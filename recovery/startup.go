package recovery

import (
	"context"
	"time"

	"github.com/cmlab/cmlab/engine"
)

// StartOptions configure the recovery run at every daemon start.
type StartOptions struct {
	// Lookback is the auto-resume window (default 2h).
	Lookback time.Duration
	// Now is the clock (injected in tests).
	Now func() time.Time
}

// Plan is the outcome of a recovery run. (Steps issue: filled in.)
type Plan struct{}

// OnStart runs recovery steps 3–5 of SPEC §8 on an open engine (the engine
// already repaired the tail and caught the views up). STUB.
func OnStart(ctx context.Context, eng *engine.Engine, opts StartOptions) (*Plan, error) {
	return &Plan{}, nil
}

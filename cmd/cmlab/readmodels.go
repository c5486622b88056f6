package main

import (
	"context"
	"fmt"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/home"
)

// leaveReadModels opens h once in this process (as a one-shot CLI command
// does: engine, step journal, retention model, request-id index, Lab
// store; and the terminal's model, daemon.Home.LeaveTerminalModel) and
// closes it, so that the read models' snapshots and the Lab
// store are written from the log now: the next daemon start after a
// `cmlab rebuild` or `cmlab restore` loads them instead of reading the
// whole log again (issue 26 item 3); after a `cmlab replay --into`
// likewise for the replayed home. A one-shot open appends no event (no
// start-up recovery, terminal manager or session event).
func leaveReadModels(ctx context.Context, h home.Home) error {
	dh, err := daemon.Open(ctx, daemon.Options{Home: h, OneShot: true})
	if err != nil {
		return fmt.Errorf("building the read models: %w", err)
	}
	if _, err := dh.LeaveTerminalModel(ctx); err != nil {
		dh.Close()
		return fmt.Errorf("building the terminal's read model: %w", err)
	}
	if err := dh.Close(); err != nil {
		return fmt.Errorf("writing the read models: %w", err)
	}
	return nil
}

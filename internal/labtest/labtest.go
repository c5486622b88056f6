// Package labtest builds Lab API servers for tests the way the daemon
// does (package daemon): over an engine the test opened, with the step
// journal and the retention model labapi.New requires. Tests that want a
// whole home — recovery, terminals, listener — use daemon.Open or
// daemon.Run instead.
package labtest

import (
	"fmt"

	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
)

// New is labapi.New(o) with what o leaves nil of what New requires: a
// step journal over o.Engine, and its retention model (retention.Open,
// logging to o.Logger).
func New(o labapi.Options) (*labapi.Server, error) {
	if o.Journal == nil && o.Engine != nil {
		j, err := steps.NewJournal(o.Engine)
		if err != nil {
			return nil, fmt.Errorf("step journal: %w", err)
		}
		o.Journal = j
	}
	if o.Retention == nil && o.Engine != nil {
		m, err := retention.Open(o.Engine, o.Logger)
		if err != nil {
			return nil, fmt.Errorf("retention model: %w", err)
		}
		o.Retention = m
	}
	return labapi.New(o)
}

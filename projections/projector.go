package projections

import (
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// Projector writes every view of one home. STUB: the projections issue
// replaces this with the real views, checkpoints and catch-up.
type Projector struct {
	home home.Home
}

// New returns a projector for h.
func New(h home.Home) *Projector { return &Projector{home: h} }

// Apply projects events, in log order.
func (p *Projector) Apply(evs []*events.Event) error { return nil }

// Close flushes and closes open view files.
func (p *Projector) Close() error { return nil }

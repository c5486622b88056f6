package pty

import (
	"context"
	"fmt"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
)

// ReasonDaemonCrashed is the reason on the END of a block that was still
// open when the daemon died.
const ReasonDaemonCrashed = "daemon_crashed"

// CloseCrashed closes what a crashed daemon left open (SPEC §8 step 4):
// for every block begun without an end it appends exactly one
// pty.block.end with status "failed" and reason "daemon_crashed"
// (interactive sessions are blocks too), and a pty.session.ended for every
// shell started without an end. It returns the ids of the blocks it closed.
// Idempotent: a second call appends nothing. Call it at daemon start,
// before any shell runs: a block of a live shell would be closed too.
func CloseCrashed(ctx context.Context, eng *engine.Engine) ([]string, error) {
	type openShell struct{ stream, id string }
	open := map[string]events.Block{} // block id → begin record
	var order []string
	streamOf := map[string]string{}
	shells := map[string]openShell{}
	var shellOrder []string
	spoolSize := map[string]int64{} // stream → spool size
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			return nil, fmt.Errorf("pty: scan log: %w", err)
		}
		switch ev.Type {
		case events.TypePtyBlockBegin:
			d, err := events.DecodeAs[*events.PtyBlockBegin](ev)
			if err != nil {
				return nil, err
			}
			if _, seen := open[d.Block.BlockID]; !seen {
				order = append(order, d.Block.BlockID)
			}
			open[d.Block.BlockID] = d.Block
			streamOf[d.Block.BlockID] = ev.Stream
		case events.TypePtyBlockEnd:
			d, err := events.DecodeAs[*events.PtyBlockEnd](ev)
			if err != nil {
				return nil, err
			}
			delete(open, d.Block.BlockID)
		case events.TypePtyOutput:
			d, err := events.DecodeAs[*events.PtyOutput](ev)
			if err != nil {
				return nil, err
			}
			spoolSize[ev.Stream] = max(spoolSize[ev.Stream], d.SpoolOffset+int64(len(d.Data)))
		case events.TypePtyPrompt:
			d, err := events.DecodeAs[*events.PtyPrompt](ev)
			if err != nil {
				return nil, err
			}
			spoolSize[ev.Stream] = max(spoolSize[ev.Stream], d.SpoolOffset+int64(len(d.Line)))
		case events.TypePtySessionStarted:
			d, err := events.DecodeAs[*events.PtySessionStarted](ev)
			if err != nil {
				return nil, err
			}
			shells[d.ShellID] = openShell{ev.Stream, d.ShellID}
			shellOrder = append(shellOrder, d.ShellID)
		case events.TypePtySessionEnded:
			d, err := events.DecodeAs[*events.PtySessionEnded](ev)
			if err != nil {
				return nil, err
			}
			delete(shells, d.ShellID)
		}
	}
	now := time.Now().UnixMilli()
	var evs []*events.Event
	var closed []string
	for _, id := range order {
		b, ok := open[id]
		if !ok {
			continue
		}
		b.Status, b.Reason, b.TsEnd, b.ExitCode = events.BlockFailed, ReasonDaemonCrashed, now, nil
		b.SpoolEnd = spoolSize[streamOf[id]]
		evs = append(evs, events.MustNew(streamOf[id], &events.PtyBlockEnd{Block: b}))
		closed = append(closed, id)
	}
	for _, id := range shellOrder {
		s, ok := shells[id]
		if !ok {
			continue
		}
		delete(shells, id)
		evs = append(evs, events.MustNew(s.stream, &events.PtySessionEnded{ShellID: s.id, Reason: ReasonDaemonCrashed}))
	}
	if len(evs) == 0 {
		return nil, nil
	}
	if _, err := eng.Append(ctx, evs...); err != nil {
		return nil, fmt.Errorf("pty: close crashed blocks: %w", err)
	}
	return closed, nil
}

// closeOrphan closes conv's open block when no shell of this manager runs
// it (the log holds it open from an earlier daemon). Caller holds the
// per-PTY lock and has stopped conv's shell, if any.
func (m *Manager) closeOrphan(ctx context.Context, conv string) error {
	var b *events.Block
	m.snapshot(conv, func(c *convState) {
		if a := c.activeBlock(); a != nil {
			cp := *a
			cp.SpoolEnd = c.size()
			b = &cp
		}
	})
	if b == nil {
		return nil
	}
	b.Status, b.Reason, b.TsEnd, b.ExitCode = events.BlockFailed, ReasonDaemonCrashed, time.Now().UnixMilli(), nil
	if _, err := m.eng.Append(ctx, events.MustNew(conv, &events.PtyBlockEnd{Block: *b})); err != nil {
		return fmt.Errorf("pty: close orphaned block: %w", err)
	}
	return nil
}

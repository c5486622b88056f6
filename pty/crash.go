package pty

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/snapshot"
)

// ReasonDaemonCrashed is the reason on the END of a block that was still
// open when the daemon died.
const ReasonDaemonCrashed = "daemon_crashed"

// LeftOpen is what the log holds open in the terminal: blocks begun
// without an END and shells started without pty.session.ended. While a
// daemon runs they are live; with none running, a crash left them (SPEC §8
// step 4), and CloseCrashed closes them.
type LeftOpen struct {
	Blocks []LeftBlock // in the order they began
	Shells []LeftShell

	spoolSize map[string]int64 // conversation → spool size
}

// LeftBlock is a block the log holds open.
type LeftBlock struct {
	ConversationID string       `json:"conversation_id"`
	Block          events.Block `json:"block"`
}

// LeftShell is a shell the log holds running.
type LeftShell struct {
	ConversationID string `json:"conversation_id"`
	ShellID        string `json:"shell_id"`
}

// ScanLeftOpen reads the terminal's events of a log (an engine's, or a
// lock-free wal.Reader's: it never writes) and returns what is left open.
func ScanLeftOpen(evs iter.Seq2[*events.Event, error]) (*LeftOpen, error) {
	open := map[string]LeftBlock{} // block id → begin record
	var order []string
	shells := map[string]LeftShell{}
	var shellOrder []string
	lo := &LeftOpen{spoolSize: map[string]int64{}}
	for ev, err := range evs {
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
			open[d.Block.BlockID] = LeftBlock{ConversationID: ev.Stream, Block: d.Block}
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
			lo.spoolSize[ev.Stream] = max(lo.spoolSize[ev.Stream], d.SpoolOffset+int64(len(d.Data)))
		case events.TypePtyPrompt:
			d, err := events.DecodeAs[*events.PtyPrompt](ev)
			if err != nil {
				return nil, err
			}
			lo.spoolSize[ev.Stream] = max(lo.spoolSize[ev.Stream], d.SpoolOffset+int64(len(d.Line)))
		case events.TypePtySessionStarted:
			d, err := events.DecodeAs[*events.PtySessionStarted](ev)
			if err != nil {
				return nil, err
			}
			shells[d.ShellID] = LeftShell{ConversationID: ev.Stream, ShellID: d.ShellID}
			shellOrder = append(shellOrder, d.ShellID)
		case events.TypePtySessionEnded:
			d, err := events.DecodeAs[*events.PtySessionEnded](ev)
			if err != nil {
				return nil, err
			}
			delete(shells, d.ShellID)
		}
	}
	for _, id := range order {
		if b, ok := open[id]; ok {
			lo.Blocks = append(lo.Blocks, b)
		}
	}
	for _, id := range shellOrder {
		if sh, ok := shells[id]; ok {
			delete(shells, id)
			lo.Shells = append(lo.Shells, sh)
		}
	}
	return lo, nil
}

// CloseCrashed closes what a crashed daemon left open (SPEC §8 step 4):
// for every block begun without an end it appends exactly one
// pty.block.end with status "failed" and reason "daemon_crashed"
// (interactive sessions are blocks too), and a pty.session.ended for every
// shell started without an end. It returns the ids of the blocks it closed.
// Idempotent: a second call appends nothing. Call it at daemon start,
// before any shell runs: a block of a live shell would be closed too. It
// reads the terminal snapshot, when it can be trusted, and the log after
// it (NewManager does the same on its own model). With a trusted
// snapshot it first reads only what it holds open (openSets): the whole
// model (each conversation's recent blocks, prompts and spans) is decoded
// only when something is open.
func CloseCrashed(ctx context.Context, eng *engine.Engine) ([]string, error) {
	var open openSets
	if _, err := snapKind.LoadLog(&open, SnapshotFile(eng.Home()), eng.Log()); err == nil {
		for ev, err := range eng.Log().Events(open.seq + 1) {
			if err != nil {
				return nil, fmt.Errorf("pty: scan log: %w", err)
			}
			open.Observe(ev)
		}
		if len(open.blocks) == 0 && len(open.shells) == 0 {
			return nil, nil
		}
	}
	md := newModel()
	if _, err := snapKind.LoadLog(&md, SnapshotFile(eng.Home()), eng.Log()); err != nil {
		md = newModel()
	}
	for ev, err := range eng.Log().Events(md.seq + 1) {
		if err != nil {
			return nil, fmt.Errorf("pty: scan log: %w", err)
		}
		md.observe(ev)
	}
	evs, closed := md.crashedEvents(time.Now().UnixMilli())
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

// openSets is the part of the terminal model CloseCrashed needs to know
// whether anything is open: the snapshot body's openBlocks and openShells
// (the conversations' states are skipped, not decoded) and the log after
// it, through trackOpen as model.observe does. A snapshot.Model for
// loading only: it is never written.
type openSets struct {
	seq            uint64
	blocks, shells []openRef
}

func (o *openSets) Observe(ev *events.Event) {
	if ev.Seq != 0 {
		if ev.Seq <= o.seq {
			return
		}
		o.seq = ev.Seq
	}
	switch ev.Type {
	case events.TypePtySessionStarted, events.TypePtySessionEnded, events.TypePtyBlockBegin, events.TypePtyBlockEnd:
	default:
		return
	}
	if p, err := ev.Decode(); err == nil {
		trackOpen(&o.blocks, &o.shells, ev.Stream, p)
	}
}

func (o *openSets) Covered() uint64 { return o.seq }

func (o *openSets) Encode() ([]byte, uint64, string, error) {
	return nil, 0, "", errors.New("pty: the open sets are read from a snapshot, never written")
}

func (o *openSets) Decode(h snapshot.Header, body []byte) error {
	var sn struct {
		OpenBlocks []openRef `json:"openBlocks"`
		OpenShells []openRef `json:"openShells"`
	}
	if err := events.Unmarshal(body, &sn); err != nil {
		return fmt.Errorf("%w: body: %v", snapshot.ErrInvalid, err)
	}
	*o = openSets{seq: h.Seq, blocks: sn.OpenBlocks, shells: sn.OpenShells}
	return nil
}

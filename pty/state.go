package pty

import (
	"github.com/cmlab/cmlab/events"
)

// Modes of a conversation's terminal (seed 001 §2.5).
const (
	ModeIdle         = "idle"
	ModeBlockRunning = "block_running"
	ModeInteractive  = "interactive"
)

// promptRec is one canonical sentinel line in the spool.
type promptRec struct {
	lineStart int64 // where "__FWS_PROMPT__" starts
	lineEnd   int64 // after its '\n'
	ts        int64
	cwd       string
	exit      *int
	blockID   string
}

// convState is what the log says about one conversation. It is built only
// by observe (history at subscribe, then every commit), so a restarted
// daemon sees exactly what the log holds.
type convState struct {
	id      string
	spool   []byte // the exact bytes of output.spool
	prompts []promptRec
	blocks  []*events.Block
	byID    map[string]*events.Block
	outputs map[string][]span // block id → its pty.output ranges (blocks/<id>.out)
	active  string            // block begun and not ended, "" when idle
	shellID string            // last shell started
	live    bool              // a started shell has no pty.session.ended yet
	cols    int
	rows    int
	changed chan struct{} // closed and replaced on every change
}

func newConvState(id string) *convState {
	return &convState{id: id, byID: map[string]*events.Block{}, outputs: map[string][]span{}, changed: make(chan struct{})}
}

func (c *convState) mode() string {
	if c.active == "" {
		return ModeIdle
	}
	if b := c.byID[c.active]; b != nil && b.Mode == "interactive" {
		return ModeInteractive
	}
	return ModeBlockRunning
}

func (c *convState) activeBlock() *events.Block {
	if c.active == "" {
		return nil
	}
	return c.byID[c.active]
}

func (c *convState) size() int64 { return int64(len(c.spool)) }

func (c *convState) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// observe applies one committed event. It runs inside the committer: it
// never blocks and never appends. The caller holds Manager.stateMu.
func (m *Manager) observe(ev *events.Event) {
	switch ev.Type {
	case events.TypePtySessionStarted, events.TypePtyBlockBegin, events.TypePtyOutput,
		events.TypePtyBlockEnd, events.TypePtyPrompt, events.TypePtySessionEnded:
	default:
		return
	}
	p, err := ev.Decode()
	if err != nil {
		return
	}
	c := m.conv(ev.Stream)
	switch d := p.(type) {
	case *events.PtySessionStarted:
		c.shellID, c.live, c.cols, c.rows = d.ShellID, true, d.Cols, d.Rows
	case *events.PtySessionEnded:
		if d.ShellID == c.shellID {
			c.live = false
		}
	case *events.PtyBlockBegin:
		b := d.Block
		c.blocks = append(c.blocks, &b)
		c.byID[b.BlockID] = &b
		c.active = b.BlockID
	case *events.PtyBlockEnd:
		b := d.Block
		if old := c.byID[b.BlockID]; old != nil {
			*old = b
		} else {
			c.blocks = append(c.blocks, &b)
			c.byID[b.BlockID] = &b
		}
		if c.active == b.BlockID {
			c.active = ""
		}
	case *events.PtyOutput:
		// Offsets are assigned by the one writer of the spool; a gap or
		// overlap would be a bug, so the bytes land where the event says.
		c.writeAt(d.SpoolOffset, d.Data)
		if d.BlockID != "" && len(d.Data) > 0 {
			segs := c.outputs[d.BlockID]
			if n := len(segs); n > 0 && segs[n-1].end == d.SpoolOffset {
				segs[n-1].end += int64(len(d.Data))
			} else {
				segs = append(segs, span{d.SpoolOffset, d.SpoolOffset + int64(len(d.Data))})
			}
			c.outputs[d.BlockID] = segs
		}
	case *events.PtyPrompt:
		line := []byte(d.Line)
		c.writeAt(d.SpoolOffset, line)
		start := d.SpoolOffset
		if len(line) > 0 && line[0] == '\n' {
			start++
		}
		c.prompts = append(c.prompts, promptRec{lineStart: start, lineEnd: d.SpoolOffset + int64(len(line)),
			ts: d.PromptTS, cwd: d.Cwd, exit: d.ExitCode, blockID: d.BlockID})
	}
	c.notify()
}

// span is a byte range [start, end) of the spool.
type span struct{ start, end int64 }

// blockOutput is the block's output: the data of its pty.output events,
// exactly what the projector writes to blocks/<id>.out.
func (c *convState) blockOutput(id string) []byte {
	segs := c.outputs[id]
	if len(segs) == 1 {
		return c.spool[segs[0].start:segs[0].end]
	}
	var out []byte
	for _, s := range segs {
		out = append(out, c.spool[s.start:s.end]...)
	}
	return out
}

func (c *convState) writeAt(off int64, data []byte) {
	switch {
	case off == int64(len(c.spool)):
		c.spool = append(c.spool, data...)
	case off < int64(len(c.spool)):
		// Already there (never expected): keep the spool append-only.
		if end := off + int64(len(data)); end > int64(len(c.spool)) {
			c.spool = append(c.spool, data[int64(len(c.spool))-off:]...)
		}
	default:
		pad := make([]byte, off-int64(len(c.spool)))
		c.spool = append(append(c.spool, pad...), data...)
	}
}

// conv returns the state of id, creating it. Caller holds stateMu.
func (m *Manager) conv(id string) *convState {
	c := m.convs[id]
	if c == nil {
		c = newConvState(id)
		m.convs[id] = c
	}
	return c
}

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

// TailBuffer is how many of a conversation's last spool bytes the manager
// keeps in memory (at most twice that between trims): the bytes a wait
// scans when it is woken by new output. Everything older is read from
// output.spool by offset.
const TailBuffer = 1 << 20

// promptRec is one canonical sentinel line in the spool.
type promptRec struct {
	lineStart int64 // where "__FWS_PROMPT__" starts
	lineEnd   int64 // after its '\n'
	ts        int64
	cwd       string
	exit      *int
	blockID   string
	seq       uint64 // the log seq of its pty.prompt
}

// convState is what the log says about one conversation. It is built only
// by observe (history at subscribe — or a snapshot and the log after it —
// then every commit), so a restarted daemon sees exactly what the log
// holds. It never holds the spool: only its size, its last byte and the
// last TailBuffer bytes; the file pty/<conversationId>/output.spool, which
// the projector writes before observers see a commit, is the only copy.
type convState struct {
	id      string
	spoolSz int64  // bytes of output.spool the log accounts for
	last    byte   // the spool's last byte; 0 when empty
	tail    []byte // the spool's last bytes, ending at size; never rewritten in place
	prompts []promptRec
	blocks  []*events.Block
	byID    map[string]*events.Block
	outputs map[string][]span // block id → its output ranges in the spool (blocks/<id>.out)
	active  string            // block begun and not ended, "" when idle
	shellID string            // last shell started
	live    bool              // a started shell has no pty.session.ended yet
	cols    int
	rows    int
	dropped int64              // output bytes dropped past a cap (pty.truncated), whole conversation
	blkDrop map[string]int64   // block id → bytes dropped, for a block still open
	inputs  []inputRec         // what was typed, where (input.go)
	hist    history            // the past dropped from blocks, prompts, outputs and inputs (history.go)
	replay  bool               // a replayed history (history.go): no tail, no trimming
	at      uint64             // the log seq of the event being applied
	spans   map[string]seqSpan // block id → the log seqs of its BEGIN and END (history_drops.go)
	drops   []pastDrop         // what each trim dropped, oldest first (history_drops.go)
	keep    int                // recent blocks kept (model.keep)
	changed chan struct{}      // closed and replaced on every change
}

func newConvState(id string, keep int) *convState {
	c := &convState{id: id, keep: keep, byID: map[string]*events.Block{}, outputs: map[string][]span{},
		blkDrop: map[string]int64{}, spans: map[string]seqSpan{}, changed: make(chan struct{})}
	// A conversation whose id is no path has no events view to replay.
	c.hist.keepAll = validConv(id) != nil
	return c
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

func (c *convState) size() int64 { return c.spoolSz }

// lastByte is the spool's last byte, '\n' for an empty spool (a sentinel
// line then needs no newline before it).
func (c *convState) lastByte() byte {
	if c.spoolSz == 0 {
		return '\n'
	}
	return c.last
}

// blockBytes is the size of block id's output.
func (c *convState) blockBytes(id string) int64 {
	var n int64
	for _, s := range c.outputs[id] {
		n += s.end - s.start
	}
	return n
}

func (c *convState) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// view is what a reader needs to read the spool outside stateMu.
func (c *convState) view() spoolView {
	return spoolView{conv: c.id, size: c.spoolSz, tail: c.tail}
}

// model is the terminal's read model: every conversation's state, and
// what the log holds open across them, covering the log up to seq. The
// Manager guards it with stateMu; CloseCrashed builds one of its own.
type model struct {
	convs      map[string]*convState
	seq        uint64    // last event observed (the model covers the log up to it)
	eventID    string    // its id
	fed        int       // events observed since the model was built (tests)
	firstFed   uint64    // the first of them
	openBlocks []openRef // blocks begun without an END, in begin order
	openShells []openRef // shells started without pty.session.ended, in start order
	keep       int       // recent blocks a conversation keeps (Options.HistoryBlocks)
}

// openRef names a block or shell of a conversation.
type openRef struct {
	Conv string `json:"conv"`
	ID   string `json:"id"`
}

// newModel returns an empty model whose conversations keep the default
// number of recent blocks.
func newModel() model { return newModelKeeping(keepBlocks) }

// newModelKeeping returns an empty model whose conversations keep keep
// recent blocks (convState.trim; negative: all).
func newModelKeeping(keep int) model { return model{convs: map[string]*convState{}, keep: keep} }

// trackOpen applies payload p of conversation conv to the blocks and
// shells the log holds open (model.observe, and CloseCrashed's openSets).
func trackOpen(blocks, shells *[]openRef, conv string, p any) {
	switch d := p.(type) {
	case *events.PtySessionStarted:
		*shells = append(dropRef(*shells, d.ShellID), openRef{conv, d.ShellID})
	case *events.PtySessionEnded:
		*shells = dropRef(*shells, d.ShellID)
	case *events.PtyBlockBegin:
		*blocks = append(dropRef(*blocks, d.Block.BlockID), openRef{conv, d.Block.BlockID})
	case *events.PtyBlockEnd:
		*blocks = dropRef(*blocks, d.Block.BlockID)
	}
}

func dropRef(refs []openRef, id string) []openRef {
	for i, r := range refs {
		if r.ID == id {
			return append(refs[:i:i], refs[i+1:]...)
		}
	}
	return refs
}

// observe applies one committed event. It runs inside the committer: it
// never blocks and never appends. The Manager's caller holds stateMu.
func (m *model) observe(ev *events.Event) {
	if ev.Seq != 0 {
		if ev.Seq <= m.seq {
			return // covered by the snapshot
		}
		m.seq, m.eventID = ev.Seq, ev.ID
		if m.fed == 0 {
			m.firstFed = ev.Seq
		}
		m.fed++
	}
	switch ev.Type {
	case events.TypePtySessionStarted, events.TypePtyBlockBegin, events.TypePtyOutput,
		events.TypePtyBlockEnd, events.TypePtyPrompt, events.TypePtySessionEnded, events.TypePtyTruncated, events.TypePtyInput:
	default:
		return
	}
	p, err := ev.Decode()
	if err != nil {
		return
	}
	c := m.conv(ev.Stream)
	trackOpen(&m.openBlocks, &m.openShells, ev.Stream, p)
	c.at = ev.Seq
	c.apply(p)
	c.notify()
}

// apply applies one terminal payload of the conversation: what observe
// does, and what the history replay (history.go) does with the payloads
// it reads back from the conversation's events view.
func (c *convState) apply(p any) {
	switch d := p.(type) {
	case *events.PtySessionStarted:
		c.shellID, c.live, c.cols, c.rows = d.ShellID, true, d.Cols, d.Rows
	case *events.PtySessionEnded:
		if d.ShellID == c.shellID {
			c.live = false
		}
	case *events.PtyBlockBegin:
		b := d.Block
		c.hist.checkBlock(c, b, true)
		c.blocks = append(c.blocks, &b)
		c.byID[b.BlockID] = &b
		c.spans[b.BlockID] = seqSpan{c.at, c.at}
		c.active = b.BlockID
	case *events.PtyBlockEnd:
		b := d.Block
		c.hist.checkBlock(c, b, false)
		if old := c.byID[b.BlockID]; old != nil {
			*old = b
			c.spans[b.BlockID] = seqSpan{c.spans[b.BlockID].begin, c.at}
		} else {
			c.blocks = append(c.blocks, &b)
			c.byID[b.BlockID] = &b
			c.spans[b.BlockID] = seqSpan{c.at, c.at}
		}
		if c.active == b.BlockID {
			c.active = ""
		}
		delete(c.blkDrop, b.BlockID)
		c.trim()
	case *events.PtyOutput:
		// Offsets are assigned by the one writer of the spool; a gap or
		// overlap would be a bug, so the bytes land where the event says.
		c.hist.checkOutput(c, d.BlockID)
		c.writeAt(d.SpoolOffset, d.Data)
		c.addOutput(d.BlockID, d.SpoolOffset, int64(len(d.Data)))
	case *events.PtyTruncated:
		c.hist.checkOutput(c, d.BlockID)
		c.hist.checkText(d.Line)
		c.writeAt(d.SpoolOffset, []byte(d.Line))
		c.addOutput(d.BlockID, d.SpoolOffset, int64(len(d.Line)))
		c.dropped += d.Dropped
		if d.BlockID != "" && c.byID[d.BlockID] != nil && c.active == d.BlockID {
			c.blkDrop[d.BlockID] += d.Dropped
		}
	case *events.PtyInput:
		c.hist.checkText(string(d.Data))
		c.addInput(d)
	case *events.PtyPrompt:
		c.hist.checkText(d.Line)
		line := []byte(d.Line)
		c.writeAt(d.SpoolOffset, line)
		start := d.SpoolOffset
		if len(line) > 0 && line[0] == '\n' {
			start++
		}
		c.prompts = append(c.prompts, promptRec{lineStart: start, lineEnd: d.SpoolOffset + int64(len(line)),
			ts: d.PromptTS, cwd: d.Cwd, exit: d.ExitCode, blockID: d.BlockID, seq: c.at})
	}
}

// addOutput records n bytes at off as block id's output.
func (c *convState) addOutput(id string, off, n int64) {
	if id == "" || n == 0 {
		return
	}
	segs := c.outputs[id]
	if k := len(segs); k > 0 && segs[k-1].end == off {
		// A new slice: readers may hold the old one outside the lock.
		segs = append(segs[:k-1:k-1], span{segs[k-1].start, off + n})
	} else {
		segs = append(segs[:len(segs):len(segs)], span{off, off + n})
	}
	c.outputs[id] = segs
}

// span is a byte range [start, end) of the spool.
type span struct{ start, end int64 }

// writeAt places data at spool offset off: the size, the last byte and
// the tail follow; the bytes themselves are in output.spool.
func (c *convState) writeAt(off int64, data []byte) {
	if len(data) == 0 {
		return
	}
	switch {
	case off > c.spoolSz:
		// A gap (never expected): zeros, as the file would read.
		c.appendTail(make([]byte, min(off-c.spoolSz, TailBuffer)))
		c.spoolSz = off
	case off < c.spoolSz:
		// Already there (never expected): keep the spool append-only.
		end := off + int64(len(data))
		if end <= c.spoolSz {
			return
		}
		data = data[c.spoolSz-off:]
	}
	c.appendTail(data)
	c.spoolSz += int64(len(data))
	c.last = data[len(data)-1]
}

// appendTail appends to the tail, keeping at most 2×TailBuffer bytes. The
// bytes of a tail slice handed to a reader are never written again: an
// append writes past its length, a trim makes a new slice.
func (c *convState) appendTail(data []byte) {
	if c.replay {
		return
	}
	if len(data) >= TailBuffer {
		c.tail = append([]byte(nil), data[len(data)-TailBuffer:]...)
		return
	}
	if len(c.tail)+len(data) > 2*TailBuffer {
		keep := TailBuffer - len(data)
		t := make([]byte, 0, 2*TailBuffer)
		t = append(t, c.tail[len(c.tail)-keep:]...)
		c.tail = append(t, data...)
		return
	}
	c.tail = append(c.tail, data...)
}

// conv returns the state of id, creating it. Caller holds stateMu.
func (m *model) conv(id string) *convState {
	c := m.convs[id]
	if c == nil {
		c = newConvState(id, m.keep)
		m.convs[id] = c
	}
	return c
}

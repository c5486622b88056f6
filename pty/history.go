package pty

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/projections"
)

// A conversation's past in memory is bounded (issue 26): once it holds
// more than twice Options.HistoryBlocks (default keepBlocks) blocks, the
// oldest closed blocks beyond the last HistoryBlocks are dropped at a
// block's END, with their output spans, and so
// are the prompt and input records that lie wholly before the first block
// kept (at least one of each stays: exec takes its cwd from the last
// prompt, status its input_cursor from the last input). The snapshot holds
// what memory holds, so a start decodes the same bounded model whatever
// the length of the history.
//
// What was dropped is only counted (history): a question the records in
// memory cannot answer exactly — a block not among them, blocks since a
// seq before the last one dropped, a clean read reaching back before the
// first prompt or input kept, a search hit before the first block kept —
// is answered from the records of the whole past, read back from the
// conversation's events view (pty/<c>/events.jsonl, which the projector
// writes before observers see a commit) up to the seq the model covers:
// the dropped prefixes from the view, the rest from memory, then the same
// code answers as before, so the answer is the one the whole model gave.
// A read takes only what its question needs (pastScope): one block's lines
// up to its END (found by its id before any line is decoded), the block
// records up to the limit asked for, the records before an offset, or the
// dropped prefixes whole; a view that does not give them back as counted
// is ErrSpoolUnavailable (the views lag the log, or were damaged: the
// daemon regenerates them). Such a read costs up to a pass over the
// conversation's view, so it is slower than one from memory; reads near
// the present never make it.
//
// What a read takes back from the view is checked against the log
// (history_verify.go): trim keeps CRC-32C chains over the records it
// drops, each kind on its own (the blocks as they ended, their output
// spans, the prompts, the inputs: pastSums), over the whole dropped past
// and, for each trim, over what that trim dropped (a drop:
// history_drops.go, with the seqs of its records). A read of one dropped
// block (its record, output, prompts, inputs) or of a page of the block
// list finds the lines of the drops that hold it by a binary search on
// their seqs, decodes those alone and checks them against their drop's
// sums, every time: its cost does not depend on the length of the
// history. A read that needs a prefix of the past (a clean read or a
// search's block names, which stop at their offset) decodes the view up
// to the end of the dropped records and compares the whole chains on the
// first such read after a start or the next drop; the bytes it read are
// then vouched for in memory (their length and CRC-32C), and later reads
// check those bytes by their CRC, reading on to their end, before they
// answer. A view whose records are not the log's (a byte
// changed after the start-up verification, or read before that
// verification ends) is never served: the read is ErrSpoolUnavailable and
// the views are marked stale (projections.MarkViewsStale), so the next
// open regenerates them. The check is on records, not on the view's
// bytes, so every view that gives the log's records back passes: one
// regenerated, rebuilt at open or by cmlab rebuild, restored, or
// rewritten by the verification after open. A broken conversation (below)
// reads its whole view without this check.
//
// The events view gives a record back exactly when its text is valid
// UTF-8 (JSON strings); a conversation with a block, prompt line, marker
// or input that is not keeps everything from then on (keepAll), as does
// one whose id is no path (no view). Block ids are unique (newID): an
// event naming a block that is not in memory after blocks were dropped
// (an END or output for a dropped block: a log the terminal never writes)
// marks the conversation broken, and every list is then read from a
// replay of its whole view.
const keepBlocks = 100

// history counts what was dropped from the front of a conversation's
// lists.
type history struct {
	blocks    int   // closed blocks dropped from the front of convState.blocks
	maxSeq    int   // the largest Seq among them
	prompts   int   // prompt records dropped from the front
	promptEnd int64 // the largest lineEnd among them
	inputs    int   // input records dropped from the front
	inputOff  int64 // the largest off among them
	keepAll   bool  // drop nothing more: the view cannot give this past back exactly
	broken    bool  // the lists in memory may differ from the log's: read every list from the replay
	sums      pastSums
}

func (h *history) dropped() bool { return h.blocks > 0 || h.prompts > 0 || h.inputs > 0 }

// checkBlock notes a block record: an END for a block not in memory after
// blocks were dropped may name a dropped one.
func (h *history) checkBlock(c *convState, b events.Block, begin bool) {
	for _, f := range []string{b.BlockID, b.Mode, b.SessionID, b.ShellID, b.Cmd, b.Cwd, b.Status, b.Reason, b.OutputPath} {
		h.checkText(f)
	}
	if !begin && h.blocks > 0 && c.byID[b.BlockID] == nil {
		h.broken = true
	}
}

// checkOutput notes output of block id.
func (h *history) checkOutput(c *convState, id string) {
	if id != "" && h.blocks > 0 && c.byID[id] == nil {
		h.broken = true
	}
}

// checkText notes text the view holds as a JSON string.
func (h *history) checkText(s string) {
	if !utf8.ValidString(s) {
		h.keepAll = true
	}
}

// blockCount is how many blocks the conversation has had.
func (c *convState) blockCount() int { return c.hist.blocks + len(c.blocks) }

// trim drops the oldest closed blocks past the last keepBlocks, once more
// than 2×keepBlocks are held, and the prompts and inputs before the first
// block kept.
func (c *convState) trim() {
	if c.replay || c.keep < 0 || c.hist.keepAll || c.hist.broken || len(c.blocks) <= 2*c.keep {
		return
	}
	n := 0
	for ; n < len(c.blocks)-c.keep; n++ {
		b := c.blocks[n]
		if b.Status == events.BlockRunning || b.Status == events.BlockInteractive || b.BlockID == c.active || c.byID[b.BlockID] != b {
			break
		}
	}
	if n == 0 {
		return
	}
	cut := c.blocks[n].SpoolBegin
	for _, b := range c.blocks[n:] {
		cut = min(cut, b.SpoolBegin)
	}
	d := pastDrop{blocks: int32(n)}
	for i, b := range c.blocks[:n] {
		c.hist.sums.addBlock(b, c.outputs[b.BlockID])
		d.addBlock(i == 0, b, c.outputs[b.BlockID], c.spans[b.BlockID])
		delete(c.byID, b.BlockID)
		delete(c.outputs, b.BlockID)
		delete(c.spans, b.BlockID)
		c.hist.maxSeq = max(c.hist.maxSeq, b.Seq)
	}
	c.hist.blocks += n
	// New slices: readers may hold the old ones outside the lock.
	c.blocks = slices.Clone(c.blocks[n:])
	k := 0
	for ; k < len(c.prompts)-1 && c.prompts[k].lineEnd <= cut; k++ {
		c.hist.promptEnd = max(c.hist.promptEnd, c.prompts[k].lineEnd)
		c.hist.sums.addPrompt(c.prompts[k])
		d.addPrompt(k == 0, c.prompts[k])
	}
	c.hist.prompts += k
	c.prompts = slices.Clone(c.prompts[k:])
	k = 0
	for ; k < len(c.inputs)-1 && c.inputs[k].off < cut; k++ {
		c.hist.inputOff = max(c.hist.inputOff, c.inputs[k].off)
		c.hist.sums.addInput(c.inputs[k])
		d.addInput(k == 0, c.inputs[k])
	}
	c.hist.inputs += k
	c.inputs = slices.Clone(c.inputs[k:])
	// Readers may hold the old slice: appending past its length is safe.
	c.drops = append(c.drops, d)
}

// read runs f on conv's state: under stateMu when the conversation dropped
// nothing or need says the records in memory answer f exactly, else,
// outside the lock, on the state with its whole past (past).
func (m *Manager) read(conv string, need func(c *convState) bool, f func(c *convState)) error {
	return m.readScope(conv, pastScope{}, need, f)
}

// readBlock is read for an f that reads, of the past, only block id's
// records: its block, output spans, prompts and inputs.
func (m *Manager) readBlock(conv, id string, need func(c *convState) bool, f func(c *convState)) error {
	return m.readScope(conv, pastScope{block: id}, need, f)
}

// readBlocks is read for an f that reads, of the past, only the first
// limit blocks numbered after since.
func (m *Manager) readBlocks(conv string, since, limit int, need func(c *convState) bool, f func(c *convState)) error {
	return m.readScope(conv, pastScope{blocks: true, since: since, limit: limit}, need, f)
}

// readUpTo is read for an f that reads, of the past, only records of the
// spool before offset upTo (prompts and inputs before it, the blocks
// begun before it and their spans).
func (m *Manager) readUpTo(conv string, upTo int64, need func(c *convState) bool, f func(c *convState)) error {
	return m.readScope(conv, pastScope{upTo: upTo, bounded: true}, need, f)
}

// pastScope is what of the past a read needs: one block's records, the
// block records, the records before a spool offset, or (zero) everything.
// A narrower scope reads only the lines of the view that can hold it, or
// stops early.
type pastScope struct {
	block        string
	blocks       bool
	since, limit int // of blocks
	upTo         int64
	bounded      bool
}

func (m *Manager) readScope(conv string, scope pastScope, need func(c *convState) bool, f func(c *convState)) error {
	m.stateMu.Lock()
	c := m.conv(conv)
	if !c.hist.dropped() || !c.hist.broken && !need(c) {
		f(c)
		m.stateMu.Unlock()
		return nil
	}
	cp := *c
	cp.blkDrop = maps.Clone(c.blkDrop)
	seq := m.seq
	m.stateMu.Unlock()
	full, err := m.past(&cp, seq, scope)
	if err != nil {
		return err
	}
	f(full)
	return nil
}

// heldOnly is read's need of an answer the records in memory always give,
// unless the conversation is broken.
func heldOnly(*convState) bool { return false }

// past returns c (a copy taken under stateMu, covering the log up to seq)
// with the records of its past that scope names read back from its events
// view, checked against what the log's model dropped (pastSums): by a read
// of the whole dropped prefix (pastChecked), or, once such a read vouched
// for the view's bytes, by their CRC (pastScoped reads on to the vouched
// end); bytes that changed since are checked again.
func (m *Manager) past(c *convState, seq uint64, scope pastScope) (*convState, error) {
	if c.hist.broken {
		return m.pastWhole(c, seq)
	}
	var (
		full *convState
		ok   bool
		err  error
	)
	switch {
	case scope.block != "" && c.byID[scope.block] == nil:
		full, ok, err = m.pastOfDroppedBlock(c, seq, scope.block)
	case scope.blocks:
		full, ok, err = m.pastBlocksByDrops(c, seq, scope.since, scope.limit)
	}
	if ok {
		return full, err
	}
	if v, ok := m.vouched(c.id, c.hist); ok {
		rd := &viewRead{check: &v}
		full, err := m.pastScoped(c, seq, scope, rd)
		if rd.ok {
			return full, err
		}
		m.setVouch(c.id, nil)
	}
	return m.pastChecked(c, seq)
}

// pastChecked is past from a read of the view up to the end of the
// dropped records, all decoded and checked against the sums; it vouches
// for the bytes read.
func (m *Manager) pastChecked(c *convState, seq uint64) (*convState, error) {
	h := c.hist
	prefix := closedScan{since: -1, limit: h.blocks}
	rd := &viewRead{}
	rp, err := m.replayView(c.id, seq, func([]byte) bool { return true }, func(r *convState) bool {
		if len(r.blocks) < h.blocks || len(r.prompts) < h.prompts || len(r.inputs) < h.inputs {
			return false
		}
		return h.blocks == 0 || prefix.done(r.blocks)
	}, rd)
	if err != nil {
		return nil, err
	}
	if err := m.pastCounted(c.id, rp, h, false); err != nil {
		return nil, err
	}
	m.setVouch(c.id, &vouch{hist: h, off: rd.n, crc: rd.crc})
	return pastJoined(c, rp, h, false), nil
}

// pastScoped is past from a read of what scope needs of the view, whose
// bytes rd checks.
func (m *Manager) pastScoped(c *convState, seq uint64, scope pastScope, rd *viewRead) (*convState, error) {
	h := c.hist
	if scope.block != "" {
		if key, err := json.Marshal(scope.block); err == nil && string(key) == `"`+scope.block+`"` {
			return m.pastOfBlock(c, seq, scope.block, rd)
		}
	}
	filter := func([]byte) bool { return true }
	if scope.blocks {
		filter = func(line []byte) bool {
			return bytes.Contains(line, []byte(`"type":"agent_block_begin"`)) || bytes.Contains(line, []byte(`"type":"agent_block_end"`))
		}
	}
	// Both scans move forward only: a block read closed stays closed.
	wanted, prefix := closedScan{since: scope.since, limit: scope.limit}, closedScan{since: -1, limit: h.blocks}
	rp, err := m.replayView(c.id, seq, filter, func(r *convState) bool {
		if scope.bounded && r.spoolSz > scope.upTo {
			// The spool is written in log order: what follows lies after upTo.
			return true
		}
		if scope.blocks && scope.limit > 0 && len(r.blocks) < h.blocks && wanted.done(r.blocks) {
			return true
		}
		if len(r.blocks) < h.blocks || !scope.blocks && (len(r.prompts) < h.prompts || len(r.inputs) < h.inputs) {
			return false
		}
		return h.blocks == 0 || prefix.done(r.blocks)
	}, rd)
	if err != nil {
		return nil, err
	}
	if scope.blocks {
		h.prompts, h.inputs, h.promptEnd, h.inputOff = 0, 0, 0, 0
		h.sums = pastSums{Blocks: h.sums.Blocks}
		if len(rp.blocks) < h.blocks && scope.limit > 0 && wanted.done(rp.blocks) {
			// Stopped early: the blocks f takes were read.
			h.blocks, h.maxSeq = len(rp.blocks), 0
			h = pastMarks(rp, h, true)
		}
	}
	if scope.bounded && rp.spoolSz > scope.upTo {
		// Stopped early: the prefixes read are what f may need.
		h.blocks, h.prompts, h.inputs = min(h.blocks, len(rp.blocks)), min(h.prompts, len(rp.prompts)), min(h.inputs, len(rp.inputs))
		h.maxSeq, h.promptEnd, h.inputOff = 0, 0, 0
		h = pastMarks(rp, h, false)
	}
	if err := m.pastCounted(c.id, rp, h, scope.blocks); err != nil {
		return nil, err
	}
	return pastJoined(c, rp, h, scope.blocks), nil
}

// pastCounted checks that rp's first records are the ones h counts of
// the log's (its block records only, with blocksOnly).
func (m *Manager) pastCounted(conv string, rp *convState, h history, blocksOnly bool) error {
	if len(rp.blocks) < h.blocks || len(rp.prompts) < h.prompts || len(rp.inputs) < h.inputs {
		return m.pastUnavailable(conv, fmt.Sprintf("it holds %d blocks, %d prompts and %d inputs, the log at least %d, %d and %d",
			len(rp.blocks), len(rp.prompts), len(rp.inputs), h.blocks, h.prompts, h.inputs))
	}
	m.countHashed(h.blocks, h.prompts, h.inputs)
	if got := pastMarks(rp, h, blocksOnly); got != h {
		m.viewsDamaged(conv)
		return m.pastUnavailable(conv, "its dropped records are not the ones the log's model counted")
	}
	return nil
}

// pastJoined is c with rp's first records, as h counts them, before its
// own.
func pastJoined(c *convState, rp *convState, h history, blocksOnly bool) *convState {
	full := *c
	full.blocks = append(slices.Clone(rp.blocks[:h.blocks]), c.blocks...)
	full.byID = maps.Clone(c.byID)
	full.outputs = maps.Clone(c.outputs)
	for _, b := range rp.blocks[:h.blocks] {
		if full.byID[b.BlockID] == nil {
			full.byID[b.BlockID] = b
		}
		if s, ok := rp.outputs[b.BlockID]; ok && !blocksOnly {
			full.outputs[b.BlockID] = s
		}
	}
	if !blocksOnly {
		full.prompts = append(slices.Clone(rp.prompts[:h.prompts]), c.prompts...)
		full.inputs = append(slices.Clone(rp.inputs[:h.inputs]), c.inputs...)
	}
	full.hist = history{}
	return &full
}

// closedScan finds, in a replay's blocks, the first limit numbered after
// since, all closed (a dropped block, once closed, is never written
// again); it resumes where it stopped, so a replay checks each block once.
type closedScan struct {
	since, limit int
	i, n         int
}

func (s *closedScan) done(blocks []*events.Block) bool {
	for s.n < s.limit && s.i < len(blocks) {
		b := blocks[s.i]
		if b.Seq > s.since {
			if b.Status == events.BlockRunning || b.Status == events.BlockInteractive {
				return false
			}
			s.n++
		}
		s.i++
	}
	return s.n >= s.limit
}

// pastWhole is c with every list replayed from the view: a broken
// conversation's.
func (m *Manager) pastWhole(c *convState, seq uint64) (*convState, error) {
	rp, err := m.replayView(c.id, seq, func([]byte) bool { return true }, func(*convState) bool { return false }, &viewRead{})
	if err != nil {
		return nil, err
	}
	if rp.spoolSz != c.spoolSz {
		return nil, m.pastUnavailable(c.id, fmt.Sprintf("it accounts for %d spool bytes, the log for %d", rp.spoolSz, c.spoolSz))
	}
	full := *c
	full.blocks, full.byID, full.outputs, full.prompts, full.inputs = rp.blocks, rp.byID, rp.outputs, rp.prompts, rp.inputs
	full.hist = history{}
	return &full, nil
}

// pastOfBlock is c with block id's records read back from the view, up to
// its END: only the lines naming it are decoded. Its inputs' offsets are not known (the
// spool's size is not followed): they serve execLine only.
func (m *Manager) pastOfBlock(c *convState, seq uint64, id string, rd *viewRead) (*convState, error) {
	key := []byte(`"block_id":"` + id + `"`)
	// Nothing names a block after its END (its prompt commits with it, just before).
	ended := func(r *convState) bool {
		b := r.byID[id]
		return b != nil && b.Status != events.BlockRunning && b.Status != events.BlockInteractive
	}
	rp, err := m.replayView(c.id, seq, func(line []byte) bool { return bytes.Contains(line, key) }, ended, rd)
	if err != nil {
		return nil, err
	}
	full := *c
	full.byID = maps.Clone(c.byID)
	full.outputs = maps.Clone(c.outputs)
	full.blocks = nil
	if b := rp.byID[id]; b != nil && c.byID[id] == nil {
		// A dropped block precedes every block in memory.
		full.blocks = append(full.blocks, b)
		full.byID[id] = b
		full.outputs[id] = rp.outputs[id]
	}
	full.blocks = append(full.blocks, c.blocks...)
	full.prompts = append(slices.Clone(rp.prompts), c.prompts...)
	full.inputs = append(slices.Clone(rp.inputs), c.inputs...)
	full.hist = history{}
	return &full, nil
}

// pastMarks is what trim would have counted and summed of rp's first
// h.blocks blocks, h.prompts prompts and h.inputs inputs (of the blocks
// alone, without their output spans, with blocksOnly).
func pastMarks(rp *convState, h history, blocksOnly bool) history {
	got := history{blocks: h.blocks, prompts: h.prompts, inputs: h.inputs, keepAll: h.keepAll, broken: h.broken}
	for _, b := range rp.blocks[:h.blocks] {
		got.maxSeq = max(got.maxSeq, b.Seq)
		got.sums.addBlock(b, rp.outputs[b.BlockID])
	}
	if blocksOnly {
		got.sums.Outputs = 0
	}
	for _, p := range rp.prompts[:h.prompts] {
		got.promptEnd = max(got.promptEnd, p.lineEnd)
		got.sums.addPrompt(p)
	}
	for _, in := range rp.inputs[:h.inputs] {
		got.inputOff = max(got.inputOff, in.off)
		got.sums.addInput(in)
	}
	return got
}

func (m *Manager) pastUnavailable(conv, why string) error {
	return fmt.Errorf("%w: %s does not give back the terminal's past: %s", ErrSpoolUnavailable, projections.PtyEventsView(conv), why)
}

// replayView applies conv's events view, up to seq, to a fresh state until
// enough says it holds enough; rd follows every byte read (and reads on
// as far as its check needs).
func (m *Manager) replayView(conv string, seq uint64, filter func([]byte) bool, enough func(*convState) bool, rd *viewRead) (*convState, error) {
	f, err := m.openView(conv)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return replayFrom(f, conv, viewScan{seq: seq, filter: filter, enough: enough, rd: rd})
}

// openView opens conv's events view beneath the home.
func (m *Manager) openView(conv string) (*os.File, error) {
	view := projections.PtyEventsView(conv)
	f, err := confine.Open(m.root, view)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSpoolUnavailable, view, err)
	}
	return f, nil
}

// viewScan is what replayFrom reads of an events view: the lines from byte
// offset from (a line's start), of seqs lo to seq, that filter passes,
// until enough (nil: never) says the state holds enough; rd follows every
// byte read. At the line of seq spoolAt (a drop's first input, when the
// read starts at a drop) the spool's size is taken to be spool: the lines
// before it that set the size were not read.
type viewScan struct {
	from    int64
	lo, seq uint64
	filter  func([]byte) bool
	enough  func(*convState) bool
	rd      *viewRead
	spoolAt uint64
	spool   int64
}

// replayFrom applies the lines of f (conv's events view) that sc names to
// a fresh state.
func replayFrom(f *os.File, conv string, sc viewScan) (*convState, error) {
	view := projections.PtyEventsView(conv)
	c := newConvState(conv, -1)
	c.replay = true
	rd := sc.rd
	if rd == nil {
		rd = &viewRead{}
	}
	enough := sc.enough
	if enough == nil {
		enough = func(*convState) bool { return false }
	}
	size := 256 << 10
	if sc.from > 0 {
		size = 32 << 10 // a drop's lines: a whole read's buffer would read past them
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, sc.from, 1<<62), size)
	var zeros []byte
	for done := enough(c); !done || rd.more(); {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a long input's line
			long := slices.Clone(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if errors.Is(err, io.EOF) {
			break // a torn last line is the projector's to repair
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrSpoolUnavailable, view, err)
		}
		rd.add(line)
		if done {
			continue
		}
		if s, ok := lineSeq(line); ok && (s < sc.lo || s > sc.seq) {
			// Read past, or not yet reached: nothing to decode.
			done = s > sc.seq
			continue
		}
		if sc.filter != nil && !sc.filter(line) {
			continue
		}
		var l projections.PtyEventLine
		if !fastDelta(line, &l) {
			if err := json.Unmarshal(line, &l); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrSpoolUnavailable, view, err)
			}
		}
		if l.Seq > sc.seq {
			done = true
			continue
		}
		if l.Seq < sc.lo {
			continue
		}
		p, err := linePayload(&l, &zeros)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: seq %d: %v", ErrSpoolUnavailable, view, l.Seq, err)
		}
		if p != nil {
			if sc.spoolAt != 0 && l.Seq == sc.spoolAt {
				c.spoolSz = sc.spool
			}
			c.at = l.Seq
			c.apply(p)
			done = enough(c)
		}
	}
	return c, nil
}

// linePayload is the payload a line of the events view was rendered from
// (projections.renderPty, whose line types these are), as far as apply
// reads it; nil for a line
// apply ignores. An output's bytes are not in the view, only its length:
// zeros of that length stand for them (a replay keeps no tail).
func linePayload(l *projections.PtyEventLine, zeros *[]byte) (any, error) {
	off := func() (int64, error) {
		if l.SpoolOffset == nil {
			return 0, fmt.Errorf("%s without spool_offset", l.Type)
		}
		return *l.SpoolOffset, nil
	}
	switch l.Type {
	case "agent_block_begin", "agent_block_end":
		if l.Block == nil {
			return nil, fmt.Errorf("%s without block", l.Type)
		}
		if l.Type == "agent_block_begin" {
			return &events.PtyBlockBegin{Block: *l.Block}, nil
		}
		return &events.PtyBlockEnd{Block: *l.Block}, nil
	case "agent_block_delta":
		o, err := off()
		if err != nil || l.Len == nil || *l.Len < 0 {
			return nil, fmt.Errorf("output without spool_offset or len")
		}
		if len(*zeros) < *l.Len {
			*zeros = make([]byte, *l.Len)
		}
		return &events.PtyOutput{BlockID: l.BlockID, SpoolOffset: o, Data: (*zeros)[:*l.Len]}, nil
	case "agent_output_truncated":
		o, err := off()
		if err != nil {
			return nil, err
		}
		var d int64
		if l.Dropped != nil {
			d = *l.Dropped
		}
		return &events.PtyTruncated{BlockID: l.BlockID, SpoolOffset: o, Line: l.Line, Dropped: d}, nil
	case "agent_prompt":
		o, err := off()
		if err != nil {
			return nil, err
		}
		return &events.PtyPrompt{BlockID: l.BlockID, SpoolOffset: o, Line: l.Line, Cwd: l.Cwd, ExitCode: l.ExitCode}, nil
	case "agent_input":
		return &events.PtyInput{BlockID: l.BlockID, Source: l.Source, Data: []byte(l.Data)}, nil
	}
	return nil, nil // a shell's start, reset or end: not part of the lists
}

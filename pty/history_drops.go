package pty

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/cmlab/cmlab/events"
)

// Each trim is a drop (pastDrop): besides adding what it drops to the
// conversation's chains (pastSums, which a read of the whole dropped past
// checks), it keeps sums of its own records and where they lie in the log:
// the seq of the first block, prompt and input it dropped and the largest
// seq of their lines (a block's END). The events view's lines are in seq
// order, so a read that needs one dropped block, or a page of the block
// list, finds its drop's lines by a binary search on their seqs, decodes
// only them, and checks only that drop's sums: its cost does not depend
// on the length of the history. A drop holds 120 bytes in memory (per
// ~100 blocks dropped), about 160 in the snapshot.
//
// A drop's records are found among the lines of its seqs by the seq of the
// first of each kind and their counts (the lines of other drops' records
// or of records still in memory may lie among them). The input records
// hold the spool's size when they committed, which the lines before a
// drop would give: a read that starts at a drop takes it from the drop's
// first input (spool0), and follows the lines after it as a whole read
// does, so the inputs after the first are checked too.
type pastDrop struct {
	sums                       pastSums
	blocks, prompts, inputs    int32  // records of each kind dropped
	blockLo, promptLo, inputLo uint64 // the log seq of the first of each (its BEGIN for a block); 0 when none
	hi                         uint64 // the largest log seq of their lines
	unseq                      bool   // a record of no known seq: reads go through the whole past
	spool0                     int64  // the spool's size when its first input committed
	maxSeq                     int    // the largest block number among its blocks
	idMin, idMax               idKey  // the least and greatest idKey of its blocks
}

// seqSpan is the log seqs of a block's BEGIN and END (its BEGIN's while
// open).
type seqSpan struct{ begin, end uint64 }

// idKey is a block id's first 16 bytes, zero-padded: keys order as ids do
// (a ≤ b gives key(a) ≤ key(b)), so a drop whose key range does not hold
// an id's key does not hold the id. Ids the terminal makes (blk_ and a
// UUIDv7, time-ordered) fall in one drop's range, or two at its edge.
type idKey [16]byte

func keyOf(id string) (k idKey) {
	copy(k[:], id)
	return k
}

func (d *pastDrop) addBlock(first bool, b *events.Block, spans []span, at seqSpan) {
	d.sums.addBlock(b, spans)
	k := keyOf(b.BlockID)
	if first {
		d.blockLo, d.idMin, d.idMax = at.begin, k, k
	}
	if bytes.Compare(k[:], d.idMin[:]) < 0 {
		d.idMin = k
	}
	if bytes.Compare(k[:], d.idMax[:]) > 0 {
		d.idMax = k
	}
	d.maxSeq = max(d.maxSeq, b.Seq)
	d.note(at.begin, at.end)
}

func (d *pastDrop) addPrompt(first bool, p promptRec) {
	d.sums.addPrompt(p)
	d.prompts++
	if first {
		d.promptLo = p.seq
	}
	d.note(p.seq, p.seq)
}

func (d *pastDrop) addInput(first bool, in inputRec) {
	d.sums.addInput(in)
	d.inputs++
	if first {
		d.inputLo, d.spool0 = in.seq, in.off
	}
	d.note(in.seq, in.seq)
}

// note widens the drop's seqs to [begin, end]; a record of no known seq
// (0) leaves it to reads of the whole past.
func (d *pastDrop) note(begin, end uint64) {
	if begin == 0 || end < begin {
		d.unseq = true
	}
	d.hi = max(d.hi, end)
}

// lo is the drop's first seq.
func (d *pastDrop) lo() uint64 {
	lo := uint64(0)
	for _, s := range []uint64{d.blockLo, d.promptLo, d.inputLo} {
		if s != 0 && (lo == 0 || s < lo) {
			lo = s
		}
	}
	return lo
}

// located says whether the drop's lines can be found by their seqs.
func (d *pastDrop) located() bool {
	return !d.unseq && d.hi != 0 && (d.blocks == 0 || d.blockLo != 0) && (d.prompts == 0 || d.promptLo != 0) && (d.inputs == 0 || d.inputLo != 0)
}

// dropsCover says whether c's drops account for every record it dropped,
// each drop locatable: reads by drop can then stand for reads of the whole
// past.
func (c *convState) dropsCover() bool {
	var b, p, in int
	for i := range c.drops {
		d := &c.drops[i]
		if !d.located() {
			return false
		}
		b, p, in = b+int(d.blocks), p+int(d.prompts), in+int(d.inputs)
	}
	return b == c.hist.blocks && p == c.hist.prompts && in == c.hist.inputs
}

// dropRecs is what a read of one drop gave back, checked: its blocks,
// prompts and inputs, and the replay of its lines they came from.
type dropRecs struct {
	rp      *convState
	blocks  []*events.Block
	prompts []promptRec
	inputs  []inputRec
}

// readDrop reads back drop i of c (a copy covering the log up to seq) from
// the events view and checks it against the drop's sums (with blocksOnly,
// its block records alone: only BEGIN and END lines are decoded).
func (m *Manager) readDrop(c *convState, seq uint64, i int, blocksOnly bool) (*dropRecs, error) {
	d := c.drops[i]
	f, err := m.openView(c.id)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	from, err := seekSeq(f, d.lo())
	if err != nil {
		return nil, m.pastUnavailable(c.id, err.Error())
	}
	sc := viewScan{from: from, lo: d.lo(), seq: min(seq, d.hi), spoolAt: d.inputLo, spool: d.spool0}
	if blocksOnly {
		sc.filter, sc.spoolAt = blockLine, 0
	}
	rp, err := replayFrom(f, c.id, sc)
	if err != nil {
		return nil, err
	}
	r := &dropRecs{rp: rp}
	var ok bool
	if r.blocks, ok = sliceFrom(rp.blocks, int(d.blocks), func(b *events.Block) bool { return rp.spans[b.BlockID].begin == d.blockLo }); !ok {
		return nil, m.pastUnavailable(c.id, fmt.Sprintf("the %d blocks dropped from seq %d are not there", d.blocks, d.blockLo))
	}
	var got pastSums
	for _, b := range r.blocks {
		got.addBlock(b, rp.outputs[b.BlockID])
	}
	if !blocksOnly {
		if r.prompts, ok = sliceFrom(rp.prompts, int(d.prompts), func(p promptRec) bool { return p.seq == d.promptLo }); !ok {
			return nil, m.pastUnavailable(c.id, fmt.Sprintf("the %d prompts dropped from seq %d are not there", d.prompts, d.promptLo))
		}
		if r.inputs, ok = sliceFrom(rp.inputs, int(d.inputs), func(in inputRec) bool { return in.seq == d.inputLo }); !ok {
			return nil, m.pastUnavailable(c.id, fmt.Sprintf("the %d inputs dropped from seq %d are not there", d.inputs, d.inputLo))
		}
		for _, p := range r.prompts {
			got.addPrompt(p)
		}
		for _, in := range r.inputs {
			got.addInput(in)
		}
	}
	m.countHashed(len(r.blocks), len(r.prompts), len(r.inputs))
	want := d.sums
	if blocksOnly {
		got, want = pastSums{Blocks: got.Blocks}, pastSums{Blocks: want.Blocks}
	}
	if got != want {
		m.viewsDamaged(c.id)
		return nil, m.pastUnavailable(c.id, fmt.Sprintf("the records of its drop %d are not the ones the log's model dropped", i))
	}
	return r, nil
}

func blockLine(line []byte) bool {
	return bytes.Contains(line, []byte(`"type":"agent_block_begin"`)) || bytes.Contains(line, []byte(`"type":"agent_block_end"`))
}

// sliceFrom is the n records of recs from the first that first says is
// the first; false when they are not all there.
func sliceFrom[T any](recs []T, n int, first func(T) bool) ([]T, bool) {
	if n == 0 {
		return nil, true
	}
	i := slices.IndexFunc(recs, first)
	if i < 0 || len(recs)-i < n {
		return nil, false
	}
	return recs[i : i+n], true
}

// pastOfDroppedBlock is c with block id's records read back from the drop
// that holds it (checked), or c as it is when no drop may hold it (its
// key is outside every drop's range): the answer is then NotFound without
// a read. false: the drops cannot answer (a record naming the block lies
// in another drop): the caller reads the whole past.
func (m *Manager) pastOfDroppedBlock(c *convState, seq uint64, id string) (*convState, bool, error) {
	if !c.dropsCover() {
		return nil, false, nil
	}
	k := keyOf(id)
	for i := range c.drops {
		d := &c.drops[i]
		if bytes.Compare(k[:], d.idMin[:]) < 0 || bytes.Compare(k[:], d.idMax[:]) > 0 {
			continue
		}
		r, err := m.readDrop(c, seq, i, false)
		if err != nil {
			return nil, true, err
		}
		j := slices.IndexFunc(r.blocks, func(b *events.Block) bool { return b.BlockID == id })
		if j < 0 {
			continue
		}
		b := r.blocks[j]
		full := *c
		full.byID = maps.Clone(c.byID)
		full.outputs = maps.Clone(c.outputs)
		// A dropped block precedes every block in memory.
		full.blocks = append([]*events.Block{b}, c.blocks...)
		full.byID[id] = b
		full.outputs[id] = r.rp.outputs[id]
		// The records naming it lie between its BEGIN and END, so among
		// the lines read: each must be the drop's (checked) or one in memory.
		prompts, ok := naming(r.rp.prompts, r.prompts, c.prompts, id, func(p promptRec) (string, uint64) { return p.blockID, p.seq })
		if !ok {
			return nil, false, nil
		}
		inputs, ok := naming(r.rp.inputs, r.inputs, c.inputs, id, func(in inputRec) (string, uint64) { return in.blockID, in.seq })
		if !ok {
			return nil, false, nil
		}
		full.prompts = append(prompts, c.prompts...)
		full.inputs = append(inputs, c.inputs...)
		full.hist = history{}
		full.drops = nil
		return &full, true, nil
	}
	return c, true, nil
}

// naming is the records of read naming block id that are the drop's
// (checked); false when one of them is neither the drop's nor in memory.
func naming[T any](read, dropped, held []T, id string, key func(T) (string, uint64)) ([]T, bool) {
	var out []T
	for _, r := range read {
		if b, s := key(r); b == id {
			has := func(x T) bool { _, t := key(x); return t == s }
			switch {
			case slices.ContainsFunc(dropped, has):
				out = append(out, r)
			case !slices.ContainsFunc(held, has):
				return nil, false
			}
		}
	}
	return out, true
}

// pastBlocksByDrops is c with the block records of the drops that hold
// the first limit blocks numbered after since read back (checked, block
// records only) before its own; false when the drops cannot answer.
func (m *Manager) pastBlocksByDrops(c *convState, seq uint64, since, limit int) (*convState, bool, error) {
	if limit <= 0 || !c.dropsCover() {
		return nil, false, nil
	}
	var blocks []*events.Block
	n := 0
	for i := range c.drops {
		if n >= limit {
			break
		}
		if c.drops[i].maxSeq <= since {
			continue // none of its blocks is numbered after since
		}
		r, err := m.readDrop(c, seq, i, true)
		if err != nil {
			return nil, true, err
		}
		for _, b := range r.blocks {
			blocks = append(blocks, b)
			if b.Seq > since {
				n++
			}
		}
	}
	full := *c
	full.blocks = append(blocks, c.blocks...)
	full.byID = maps.Clone(c.byID)
	for _, b := range blocks {
		if full.byID[b.BlockID] == nil {
			full.byID[b.BlockID] = b
		}
	}
	full.hist = history{}
	full.drops = nil
	return &full, true, nil
}

// seekSeq is the offset in f (an events view, its lines in seq order) of a
// line at or before the first line of seq at least lo: a binary search on
// the seqs of lines, then at most a window's lines before it.
func seekSeq(f *os.File, lo uint64) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	const window = 64 << 10
	a, b := int64(0), fi.Size() // a is 0 or a line's start of a seq below lo
	buf := make([]byte, 4096)
	for b-a > window {
		mid := a + (b-a)/2
		s, seq, err := lineAfter(f, mid, b, buf)
		if err != nil {
			return 0, err
		}
		switch {
		case s < 0:
			b = mid // no line starts in [mid, b): the one holding mid started before
		case seq < lo:
			a = s
		default:
			b = s
		}
	}
	return a, nil
}

// lineAfter is the start and seq of the first line of f starting in
// (at-1, end); -1 when none starts there. A line that does not begin with
// its seq is an error (the view is not one the projector writes).
func lineAfter(f *os.File, at, end int64, buf []byte) (int64, uint64, error) {
	pos := at - 1
	for pos < end {
		n, err := f.ReadAt(buf, pos)
		if n == 0 && err != nil {
			if err == io.EOF {
				return -1, 0, nil
			}
			return 0, 0, err
		}
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			s := pos + int64(i) + 1
			if s >= end {
				return -1, 0, nil
			}
			head := make([]byte, 32)
			k, _ := f.ReadAt(head, s)
			seq, ok := lineSeq(head[:k])
			if !ok {
				return 0, 0, fmt.Errorf("the line at byte %d does not begin with its seq", s)
			}
			return s, seq, nil
		}
		pos += int64(n)
	}
	return -1, 0, nil
}

// lineSeq is the seq a line of the events view begins with.
func lineSeq(head []byte) (uint64, bool) {
	const pre = `{"seq":`
	if !bytes.HasPrefix(head, []byte(pre)) {
		return 0, false
	}
	head = head[len(pre):]
	i := 0
	for i < len(head) && head[i] >= '0' && head[i] <= '9' {
		i++
	}
	v, err := strconv.ParseUint(string(head[:i]), 10, 64)
	return v, err == nil && i < len(head) && head[i] == ','
}

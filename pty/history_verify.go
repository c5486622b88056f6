package pty

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/projections"
)

// pastSums are CRC-32C chains over the records a conversation dropped, in
// order, one chain per kind so that a read of the block records alone can
// check them: the blocks as they ended, the output spans of those blocks,
// the prompt records and the input records. trim adds what it drops, from
// the model the log built; a read back from the events view computes the
// same over the records it read (pastMarks) and answers only when they
// agree. 16 bytes per conversation (about 40 with their keys in the
// snapshot), however many records were dropped.
type pastSums struct {
	Blocks  uint32 `json:"b"`
	Outputs uint32 `json:"o"`
	Prompts uint32 `json:"p"`
	Inputs  uint32 `json:"i"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// addBlock adds a dropped block and its output spans. The encodings are
// length-prefixed, so records cannot run into each other.
func (s *pastSums) addBlock(b *events.Block, spans []span) {
	j, _ := json.Marshal(b) // every field, in a fixed order
	buf := binary.AppendUvarint(nil, uint64(len(j)))
	s.Blocks = crc32.Update(s.Blocks, castagnoli, append(buf, j...))
	buf = appendText(buf[:0], b.BlockID)
	buf = binary.AppendUvarint(buf, uint64(len(spans)))
	for _, sp := range spans {
		buf = binary.AppendVarint(binary.AppendVarint(buf, sp.start), sp.end)
	}
	s.Outputs = crc32.Update(s.Outputs, castagnoli, buf)
}

// addPrompt adds a dropped prompt record: what the events view gives back
// of it (not its ts, which the view does not hold and no read of the past
// uses).
func (s *pastSums) addPrompt(p promptRec) {
	buf := binary.AppendVarint(binary.AppendVarint(nil, p.lineStart), p.lineEnd)
	buf = appendText(appendText(buf, p.cwd), p.blockID)
	if p.exit != nil {
		buf = binary.AppendVarint(append(buf, 1), int64(*p.exit))
	} else {
		buf = append(buf, 0)
	}
	s.Prompts = crc32.Update(s.Prompts, castagnoli, buf)
}

// addInput adds a dropped input record.
func (s *pastSums) addInput(in inputRec) {
	buf := binary.AppendVarint(nil, in.off)
	buf = appendText(appendText(buf, in.source), in.blockID)
	buf = appendText(buf, string(in.data))
	s.Inputs = crc32.Update(s.Inputs, castagnoli, buf)
}

func appendText(buf []byte, s string) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(s))), s...)
}

// vouch says that conv's events view, up to off bytes whose CRC-32C is crc,
// gave back the dropped records counted by hist, checked against hist's
// sums: a later read whose bytes up to off have the same CRC reads the
// same records and needs no check of its own beyond that CRC. It is kept
// in memory only (a start checks again on the first read of the past).
type vouch struct {
	hist history
	off  int64
	crc  uint32
}

// viewRead follows the bytes a replay of the events view reads: n bytes,
// whose CRC-32C is crc. With check, the replay reads on, past what it
// needs, to check.off, and ok says whether the bytes up to there are the
// ones check vouched for.
type viewRead struct {
	n     int64
	crc   uint32
	check *vouch
	ok    bool
}

func (r *viewRead) add(line []byte) {
	r.n += int64(len(line))
	r.crc = crc32.Update(r.crc, castagnoli, line)
	if r.check != nil && r.n == r.check.off {
		r.ok = r.crc == r.check.crc
	}
}

// more says whether the replay must read on once it holds what it needs.
func (r *viewRead) more() bool { return r.check != nil && r.n < r.check.off }

// vouched is the vouch for conv's view that holds for hist, if any.
func (m *Manager) vouched(conv string, hist history) (vouch, bool) {
	m.vouchMu.Lock()
	defer m.vouchMu.Unlock()
	v, ok := m.vouches[conv]
	return v, ok && v.hist == hist
}

func (m *Manager) setVouch(conv string, v *vouch) {
	m.vouchMu.Lock()
	defer m.vouchMu.Unlock()
	if v == nil {
		delete(m.vouches, conv)
		return
	}
	if m.vouches == nil {
		m.vouches = map[string]vouch{}
	}
	m.vouches[conv] = *v
}

// viewsDamaged records that conv's events view gave back records other
// than the log's: the views are marked stale, so the next open
// regenerates them from the log (projections.MarkViewsStale, the salvage's
// path), once per manager.
func (m *Manager) viewsDamaged(conv string) {
	m.staleOnce.Do(func() {
		m.logf("terminal: %s does not give back the records of the log: the next start regenerates the views", projections.PtyEventsView(conv))
		if m.eng.ReadOnly() {
			return
		}
		if err := projections.MarkViewsStale(m.eng.Home()); err != nil {
			m.logf("terminal: marking the views stale: %v", err)
		}
	})
}

// fastDelta decodes into l a line of the events view of exactly the shape
// projections writes for an output event,
//
//	{"seq":N,"ts":N,"type":"agent_block_delta","block_id":"ID","spool_offset":N,"len":N}
//
// (most lines of a busy conversation's view), without encoding/json, which
// costs a read of the past ten times as much; it reports false, leaving l
// alone, for any other line (another type or field, an escape or a byte
// outside printable ASCII in the id, a number JSON would refuse), which
// json.Unmarshal then decodes: both give the same values.
func fastDelta(line []byte, l *projections.PtyEventLine) bool {
	p := line
	lit := func(s string) bool {
		if len(p) < len(s) || string(p[:len(s)]) != s {
			return false
		}
		p = p[len(s):]
		return true
	}
	num := func(neg bool) (int64, bool) {
		i, sign := 0, int64(1)
		if neg && len(p) > 0 && p[0] == '-' {
			i, sign = 1, -1
		}
		start := i
		var v int64
		for ; i < len(p) && p[i] >= '0' && p[i] <= '9'; i++ {
			v = v*10 + int64(p[i]-'0')
		}
		n := i - start
		if n == 0 || n > 18 || n > 1 && p[start] == '0' {
			return 0, false
		}
		p = p[i:]
		return sign * v, true
	}
	if !lit(`{"seq":`) {
		return false
	}
	seq, ok := num(false)
	if !ok || !lit(`,"ts":`) {
		return false
	}
	ts, ok := num(true)
	if !ok || !lit(`,"type":"agent_block_delta","block_id":"`) {
		return false
	}
	i := 0
	for ; i < len(p) && p[i] != '"'; i++ {
		if p[i] < 0x20 || p[i] >= 0x7f || p[i] == '\\' {
			return false
		}
	}
	if i == 0 || i == len(p) {
		return false
	}
	id := string(p[:i])
	p = p[i:]
	if !lit(`","spool_offset":`) {
		return false
	}
	off, ok := num(true)
	if !ok || !lit(`,"len":`) {
		return false
	}
	n, ok := num(true)
	if !ok || !lit("}\n") || len(p) != 0 || int64(int(n)) != n {
		return false
	}
	length := int(n)
	*l = projections.PtyEventLine{Seq: uint64(seq), TS: ts, Type: "agent_block_delta", BlockID: id, SpoolOffset: &off, Len: &length}
	return true
}

// countHashed counts records of the past checked against their sums.
func (m *Manager) countHashed(blocks, prompts, inputs int) {
	m.hashed[0].Add(int64(blocks))
	m.hashed[1].Add(int64(prompts))
	m.hashed[2].Add(int64(inputs))
}

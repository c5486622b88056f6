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
// agree. 16 bytes per conversation, however many records were dropped.
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

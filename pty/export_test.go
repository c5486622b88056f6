package pty

import (
	"encoding/json"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/projections"
)

// Test hooks of package pty_test.

// TailLen is the number of spool bytes conv's state holds in memory.
func (m *Manager) TailLen(conv string) int {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if c := m.convs[conv]; c != nil {
		return len(c.tail)
	}
	return 0
}

// Fed is the number of events the manager's model was fed, and the
// lowest seq among them (0 when none).
func (m *Manager) Fed() (int, uint64) {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	return m.fed, m.firstFed
}

// SnapSeq is the seq of the snapshot the manager loaded or last wrote.
func (m *Manager) SnapSeq() uint64 {
	if m.snapW == nil {
		return 0
	}
	return m.snapW.Seq()
}

// ModelBytes is the manager's model encoded as its snapshot body.
func (m *Manager) ModelBytes() []byte {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	b, err := m.model.encode()
	if err != nil {
		panic(err)
	}
	return b
}

// ReplayModelBytes is the model built from the whole log of eng, encoded.
func ReplayModelBytes(eng *engine.Engine) []byte {
	md := newModel()
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			panic(err)
		}
		md.observe(ev)
	}
	b, err := md.encode()
	if err != nil {
		panic(err)
	}
	return b
}

// WriteSnapshotNow writes the snapshot whenever the model moved.
func (m *Manager) WriteSnapshotNow() (bool, error) {
	return m.snapW.Write(0)
}

// SnapshotModelVersion are the model name and code version of the
// terminal snapshot.
func SnapshotModelVersion() (string, string) { return snapKind.Name, snapKind.Version() }

// ModelJSON decodes an encoded model for a readable diff.
func ModelJSON(b []byte) string {
	var sn snapBody
	if err := events.Unmarshal(b, &sn); err != nil {
		return err.Error()
	}
	j, _ := json.MarshalIndent(sn, "", " ")
	return string(j)
}

// ForgetVouches drops what reads of the past vouched for: the next read
// of each conversation's past checks its records again.
func (m *Manager) ForgetVouches() {
	m.vouchMu.Lock()
	defer m.vouchMu.Unlock()
	clear(m.vouches)
}

// FastDelta is fastDelta.
func FastDelta(line []byte, l *projections.PtyEventLine) bool { return fastDelta(line, l) }

// Hashed is how many blocks, prompts and inputs of the past reads
// checked against their sums so far.
func (m *Manager) Hashed() [3]int64 {
	return [3]int64{m.hashed[0].Load(), m.hashed[1].Load(), m.hashed[2].Load()}
}

// DropCounts is what one drop of a conversation dropped: its blocks,
// prompts and inputs, and its largest block number.
type DropCounts struct {
	Blocks, Prompts, Inputs int64
	MaxSeq                  int
}

// Drops is conv's drops, oldest first.
func (m *Manager) Drops(conv string) []DropCounts {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	var out []DropCounts
	if c := m.convs[conv]; c != nil {
		for _, d := range c.drops {
			out = append(out, DropCounts{int64(d.blocks), int64(d.prompts), int64(d.inputs), d.maxSeq})
		}
	}
	return out
}

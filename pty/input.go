package pty

import (
	"github.com/cmlab/cmlab/events"
)

// What was typed, and where (issue 25). Every pty.input event is recorded
// in the read model with the spool size when it committed: the cursor
// taken before the input, since every byte the input causes is committed
// after it (the event is durable before the bytes are typed). The model
// keeps, per input, that offset, its source, its block and its data (cut
// to maxInputKept bytes; an exec line to maxExecLineKept), for
//
//   - the clean view (clean.go): an exec line the terminal echoed (a
//     program that turned echo back on) is hidden; what send and
//     expect_send typed is shown where it was typed, as a terminal shows
//     typing;
//   - resume cursors: LastInputCursor is where a wait that names no cursor
//     starts in the CLI, so it sees the reaction to the last thing typed.
type inputRec struct {
	off     int64 // spool size when the input committed
	source  string
	blockID string
	data    []byte
	seq     uint64 // the log seq of its pty.input
}

// inputSnap is an inputRec in the snapshot.
type inputSnap struct {
	Off    int64  `json:"o"`
	Source string `json:"s"`
	Block  string `json:"b"`
	Data   []byte `json:"d"`
	Seq    uint64 `json:"q"`
}

const (
	// maxInputKept bounds the data kept of one send or expect_send (the
	// transcript shows the start of a longer one).
	maxInputKept = 4 << 10
	// maxExecLineKept bounds the exec line kept to recognise its echo; a
	// longer line's echo is shown.
	maxExecLineKept = 64 << 10
)

func (c *convState) addInput(d *events.PtyInput) {
	limit := maxInputKept
	if d.Source == "exec" {
		limit = maxExecLineKept
	}
	data := d.Data
	if len(data) > limit {
		if d.Source == "exec" {
			data = nil // never matched: an echo of it is shown as is
		} else {
			data = data[:limit]
		}
	}
	c.inputs = append(c.inputs, inputRec{off: c.spoolSz, source: d.Source, blockID: d.BlockID, data: append([]byte(nil), data...), seq: c.at})
}

// lastInputCursor is the spool size when the last input committed, 0
// when nothing was typed yet.
func (c *convState) lastInputCursor() int64 {
	if n := len(c.inputs); n > 0 {
		return c.inputs[n-1].off
	}
	return 0
}

// execLine is the line typed for block id, nil when unknown.
func (c *convState) execLine(id string) []byte {
	for i := len(c.inputs) - 1; i >= 0; i-- {
		if in := c.inputs[i]; in.blockID == id && in.source == "exec" {
			return in.data
		}
	}
	return nil
}

// known reports whether conv has any terminal history (a shell was
// started, or anything was recorded): a wait or read on a conversation
// that has none is NOT_FOUND at once — most likely a mistyped id.
func (m *Manager) known(conv string) bool {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	c := m.convs[conv]
	return c != nil && (c.shellID != "" || c.spoolSz > 0 || c.blockCount() > 0)
}

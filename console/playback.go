package console

import (
	"bytes"
	"slices"
	"sort"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// Playback (issue 30 §5): a conversation's terminal history — or one
// block's — as a recording, the records `cmlab replay pty --asciicast`
// writes (the clean view: each block as "$ cmd" and its output, what was
// typed where it was typed), whose frames are rendered on the server at
// their times. A frame is the terminal after one output record: the
// transcript so far rendered as a log shows it (RenderOutput), or, while
// a full-screen (interactive) block runs, the screen it drew (RenderScreen
// at its shell's pty size).

// Bounds of one recording: the output kept and the frames played (frames
// closer together than the recording's length allows are merged into the
// later one, the scrubber's resolution).
const (
	MaxRecordingBytes  = 8 << 20
	MaxRecordingFrames = 4000
	// FrameWindow is how much of the transcript's end one frame renders
	// (a terminal shows the end of its scrollback).
	FrameWindow = 256 << 10
)

// Recording is a conversation's (or a block's) terminal history ready to
// play.
type Recording struct {
	Start    int64 `json:"start"`    // ms since the epoch of the first record
	Duration int64 `json:"duration"` // ms from Start to the last frame
	Cols     int   `json:"cols"`     // the pty of the first shell
	Rows     int   `json:"rows"`
	// Partial: the history's start was not read (the caller's budget or
	// MaxRecordingBytes); the recording starts later than the
	// conversation did.
	Partial bool        `json:"partial"`
	Frames  []PlayFrame `json:"frames"`
	out     []byte      // the output records, concatenated
	// screens are the finished full-screen blocks' output in out, shown
	// in the transcript as the screen each left (as a terminal's
	// scrollback keeps it), not as the cursor movements that drew it.
	screens []splice
}

// splice replaces out[from:to] by text in the transcript.
type splice struct {
	from, to int
	text     []byte
}

// PlayFrame is the terminal at T: out[:End], or the screen of the
// full-screen block whose output starts at Screen (-1 for none) drawn on a
// Cols×Rows pty.
type PlayFrame struct {
	T      int64 `json:"t"` // ms after the recording's start
	End    int   `json:"end"`
	Screen int   `json:"-"`
	Cols   int   `json:"-"`
	Rows   int   `json:"-"`
}

// NewRecording builds the recording of conv from evs, its terminal
// events in log order; block, when set, keeps that block's events only
// (its size is then cols×rows). cols×rows is the size until a
// pty.session.started says (the caller's best knowledge, or
// DefaultCols×DefaultRows).
func NewRecording(conv, block string, evs []*events.Event, cols, rows int) (*Recording, error) {
	if cols <= 0 || rows <= 0 {
		cols, rows = DefaultCols, DefaultRows
	}
	r := &Recording{Cols: cols, Rows: rows, Frames: []PlayFrame{}}
	screen := -1               // start of the running full-screen block's output
	screenBlk := ""            // its id
	var screenAt *events.Event // its begin
	var cur *events.Event
	seq := func(yield func(*events.Event, error) bool) {
		for _, ev := range evs {
			if block != "" && !inBlock(ev, block) {
				continue
			}
			cur = ev
			switch ev.Type {
			case events.TypePtySessionStarted:
				if d, err := events.DecodeAs[*events.PtySessionStarted](ev); err == nil && d.Cols > 0 && d.Rows > 0 {
					cols, rows = d.Cols, d.Rows
				}
			case events.TypePtyBlockBegin:
				if d, err := events.DecodeAs[*events.PtyBlockBegin](ev); err == nil && d.Block.Mode == "interactive" {
					// Its screen starts after its "$ cmd" line, which
					// this event's records write.
					screen, screenBlk, screenAt = len(r.out), d.Block.BlockID, ev
				}
			case events.TypePtyBlockEnd:
				if d, err := events.DecodeAs[*events.PtyBlockEnd](ev); err == nil && d.Block.BlockID == screenBlk && screen >= 0 && len(r.Frames) > 0 {
					// The program left: the transcript shows again, with the
					// screen it left in place of what drew it.
					text := screenText(r.out[max(screen, len(r.out)-MaxRecordingBytes/2):], cols, rows)
					r.screens = append(r.screens, splice{screen, len(r.out), []byte(text + "\r\n")})
					screen, screenBlk = -1, ""
					r.addFrame(PlayFrame{T: ev.TS - r.Start, End: len(r.out), Screen: -1, Cols: cols, Rows: rows})
				}
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
	head := func(h pty.AsciicastHeader, t0 int64) error {
		// The header's size is asciicast's default unless the history
		// starts with a shell; the size tracked here is the caller's then.
		r.Start, r.Cols, r.Rows = t0, cols, rows
		return nil
	}
	_, err := pty.AsciicastRecords(conv, seq, false, head, func(rec pty.AsciicastRecord) error {
		if rec.Code != "o" || cur == nil {
			return nil
		}
		r.out = append(r.out, rec.Data...)
		if cur == screenAt {
			screen = len(r.out)
		}
		r.addFrame(PlayFrame{T: rec.TS - r.Start, End: len(r.out), Screen: screen, Cols: cols, Rows: rows})
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.thin()
	if n := len(r.Frames); n > 0 {
		r.Duration = r.Frames[n-1].T
	}
	return r, nil
}

// inBlock reports whether ev belongs to block's playback (the size is
// the caller's: the block's shell's).
func inBlock(ev *events.Event, block string) bool {
	switch ev.Type {
	case events.TypePtyBlockBegin, events.TypePtyBlockEnd, events.TypePtyOutput, events.TypePtyInput, events.TypePtyTruncated, events.TypePtyPrompt:
		// Every one of them names its block; a cheap look first.
		if !bytes.Contains(ev.Data, []byte(block)) {
			return false
		}
		p, err := ev.Decode()
		if err != nil {
			return false
		}
		switch d := p.(type) {
		case *events.PtyBlockBegin:
			return d.Block.BlockID == block
		case *events.PtyBlockEnd:
			return d.Block.BlockID == block
		case *events.PtyOutput:
			return d.BlockID == block
		case *events.PtyInput:
			return d.BlockID == block // the exec's own input hides its echo
		case *events.PtyTruncated:
			return d.BlockID == block
		case *events.PtyPrompt:
			return d.BlockID == block
		}
	}
	return false
}

// addFrame appends f; a frame at the same time as the last replaces it.
func (r *Recording) addFrame(f PlayFrame) {
	if f.T < 0 {
		f.T = 0
	}
	if n := len(r.Frames); n > 0 {
		if f.T < r.Frames[n-1].T {
			f.T = r.Frames[n-1].T // the log's clock stepped back: keep order
		}
		if f.T == r.Frames[n-1].T {
			r.Frames[n-1] = f
			return
		}
	}
	r.Frames = append(r.Frames, f)
}

// thin merges frames until at most MaxRecordingFrames remain: of the
// frames within one slot of Duration/MaxRecordingFrames the last is kept
// (and every change between the transcript and a screen).
func (r *Recording) thin() {
	n := len(r.Frames)
	if n <= MaxRecordingFrames {
		return
	}
	slot := r.Frames[n-1].T/int64(MaxRecordingFrames) + 1
	kept := r.Frames[:0]
	for i, f := range r.Frames {
		last := i == n-1
		if !last {
			next := r.Frames[i+1]
			if next.T/slot == f.T/slot && (next.Screen >= 0) == (f.Screen >= 0) {
				continue
			}
		}
		kept = append(kept, f)
	}
	r.Frames = slices.Clip(kept)
}

// At returns the index of the frame on the terminal at t ms after the
// start (the last at or before t), -1 before the first.
func (r *Recording) At(t int64) int {
	return sort.Search(len(r.Frames), func(i int) bool { return r.Frames[i].T > t }) - 1
}

// Render renders frame i (-1: the empty terminal), of the transcript at
// most window bytes of its end, cut at a line start.
func (r *Recording) Render(i, window int) string {
	if i < 0 || i >= len(r.Frames) {
		return ""
	}
	f := r.Frames[i]
	if f.Screen >= 0 {
		from := f.Screen
		if f.End-from > MaxRecordingBytes/2 {
			from = f.End - MaxRecordingBytes/2
		}
		return RenderScreen(r.out[from:f.End], f.Cols, f.Rows)
	}
	from := 0
	if f.End > window {
		from = f.End - window
		if k := bytes.IndexByte(r.out[from:f.End], '\n'); k >= 0 {
			from += k + 1
		}
	}
	var b []byte
	pos := from
	for _, sp := range r.screens {
		if sp.to > f.End || sp.to <= from {
			continue
		}
		b = append(b, r.out[pos:max(pos, sp.from)]...)
		b = append(b, sp.text...)
		pos = sp.to
	}
	if b == nil {
		return RenderOutput(r.out[from:f.End])
	}
	return RenderOutput(append(b, r.out[pos:f.End]...))
}

// Bytes is the output the recording holds.
func (r *Recording) Bytes() int { return len(r.out) }

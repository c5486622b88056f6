package console

import (
	"testing"

	"github.com/cmlab/cmlab/events"
)

// ptyEv is a terminal event of conv at ts.
func ptyEv(ts int64, p events.Payload) *events.Event {
	ev := events.MustNew("c1", p)
	ev.TS = ts
	return ev
}

// TestRecordingFrames: a conversation of a block and a full-screen block
// plays as frames at the log's times: the transcript ("$ cmd" and output)
// while no program holds the screen, the program's screen at the shell's
// pty size while it runs (a cursor-addressed redraw shows its last
// state), the transcript again after it; At finds the frame on the
// terminal at a time; one block's recording holds that block only.
func TestRecordingFrames(t *testing.T) {
	b1 := events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", ShellID: "sh_1", Cmd: "echo hi", TsBegin: 1000}
	b2 := events.Block{BlockID: "blk_2", Seq: 2, Mode: "interactive", ShellID: "sh_1", Cmd: "top", TsBegin: 3000}
	end1, end2 := b1, b2
	end1.TsEnd, end2.TsEnd = 1500, 5000
	evs := []*events.Event{
		ptyEv(900, &events.PtySessionStarted{ConversationID: "c1", ShellID: "sh_1", Cols: 30, Rows: 4}),
		ptyEv(1000, &events.PtyBlockBegin{Block: b1}),
		ptyEv(1000, &events.PtyInput{Data: []byte("eval $'echo hi'\n"), BlockID: "blk_1", Source: "exec"}),
		ptyEv(1200, &events.PtyOutput{BlockID: "blk_1", Data: []byte("hi\n")}),
		ptyEv(1500, &events.PtyBlockEnd{Block: end1}),
		ptyEv(3000, &events.PtyBlockBegin{Block: b2}),
		ptyEv(3500, &events.PtyOutput{BlockID: "blk_2", Data: []byte("\x1b[2J\x1b[Hload 1.0")}),
		ptyEv(4000, &events.PtyOutput{BlockID: "blk_2", Data: []byte("\x1b[1;6H2.5")}),
		ptyEv(5000, &events.PtyBlockEnd{Block: end2}),
	}
	r, err := NewRecording("c1", "", evs, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Start != 900 || r.Duration != 4100 || r.Cols != 30 || r.Rows != 4 {
		t.Fatalf("start %d, duration %d, %d×%d", r.Start, r.Duration, r.Cols, r.Rows)
	}
	at := func(ts int64) string { return r.Render(r.At(ts-r.Start), FrameWindow) }
	if got := at(1100); got != "$ echo hi" {
		t.Errorf("at 1100 ms: %q", got)
	}
	if got := at(1300); got != "$ echo hi\nhi" {
		t.Errorf("at 1300 ms: %q", got)
	}
	if got := at(3600); got != "load 1.0" {
		t.Errorf("the screen at 3600 ms: %q", got)
	}
	if got := at(4500); got != "load 2.5" {
		t.Errorf("the screen at 4500 ms: %q", got)
	}
	if got := at(5000); got != "$ echo hi\nhi\n$ top\nload 2.5" {
		t.Errorf("after the program: %q", got)
	}
	if r.At(50) != -1 || r.Render(-1, FrameWindow) != "" {
		t.Errorf("before the first frame: %d", r.At(50))
	}
	f := r.Frames[r.At(3600-r.Start)]
	if f.Cols != 30 || f.Rows != 4 {
		t.Errorf("the screen is %d×%d", f.Cols, f.Rows)
	}
	one, err := NewRecording("c1", "blk_1", evs, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	if got := one.Render(len(one.Frames)-1, FrameWindow); got != "$ echo hi\nhi" || one.Cols != 80 || one.Start != 1000 {
		t.Errorf("block 1 alone: %q, %d cols, start %d", got, one.Cols, one.Start)
	}
}

// TestRecordingThin: a chatty program's frames are merged to at most
// MaxRecordingFrames, the last of each slot kept, and the last frame is
// the whole output.
func TestRecordingThin(t *testing.T) {
	b := events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "yes", TsBegin: 1}
	evs := []*events.Event{ptyEv(1, &events.PtyBlockBegin{Block: b})}
	for i := 0; i < 3*MaxRecordingFrames; i++ {
		evs = append(evs, ptyEv(int64(2+i), &events.PtyOutput{BlockID: "blk_1", Data: []byte("y\n")}))
	}
	r, err := NewRecording("c1", "", evs, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Frames); n > MaxRecordingFrames || n < MaxRecordingFrames/2 {
		t.Fatalf("%d frames", n)
	}
	for i := 1; i < len(r.Frames); i++ {
		if r.Frames[i].T <= r.Frames[i-1].T || r.Frames[i].End < r.Frames[i-1].End {
			t.Fatalf("frame %d %+v after %+v", i, r.Frames[i], r.Frames[i-1])
		}
	}
	if last := r.Frames[len(r.Frames)-1]; last.End != r.Bytes() || r.Duration != int64(3*MaxRecordingFrames) {
		t.Fatalf("last frame %+v of %d bytes, duration %d", last, r.Bytes(), r.Duration)
	}
}

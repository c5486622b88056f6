package labapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/pty"
)

// newSizedPtyLab is newPtyLab with a terminal of cols×rows.
func newSizedPtyLab(t *testing.T, cols, rows int) *testLab {
	t.Helper()
	var mgr *pty.Manager
	tl := newTestLab(t, func(o *Options) {
		m, err := pty.NewManager(o.Engine, pty.Options{Cols: cols, Rows: rows})
		if err != nil {
			t.Fatal(err)
		}
		mgr, o.Pty = m, m
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := mgr.Close(ctx); err != nil {
			t.Errorf("terminal manager close: %v", err)
		}
	})
	return tl
}

// awaitScreen polls the console's screen of a block until ok holds.
func (tl *testLab) awaitScreen(conv, block string, ok func(html string) bool) consoleScreenResult {
	tl.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var s consoleScreenResult
	for {
		r := tl.do("GET", "/api/console/pty/"+conv+"/blocks/"+block+"/screen", "")
		if r.status != 200 {
			tl.t.Fatalf("screen: %d %s", r.status, r.body)
		}
		if err := json.Unmarshal(r.body, &s); err != nil {
			tl.t.Fatal(err)
		}
		if ok(s.HTML) {
			return s
		}
		if time.Now().After(deadline) {
			tl.t.Fatalf("the screen never showed what was awaited: %q", s.HTML)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsoleScreenAtSessionSize: a full-screen block's screen is rendered
// at the size of the pty its shell ran in (pty.session.started's cols and
// rows in the log), not a fixed one: on a 50×12 terminal a line of 100
// characters wraps at 50, and only the last 12 rows are on the screen.
func TestConsoleScreenAtSessionSize(t *testing.T) {
	tl := newSizedPtyLab(t, 50, 12)
	r := tl.do("POST", "/api/pty/sized/exec_interactive", `{"cmd":"for i in $(seq 1 30); do echo row-$i; done; printf 'x%.0s' $(seq 1 100); echo; echo done-printing; cat"}`)
	if r.status != 200 {
		t.Fatalf("exec_interactive: %d %s", r.status, r.body)
	}
	block, _ := r.json(t)["block_id"].(string)
	s := tl.awaitScreen("sized", block, func(h string) bool { return strings.Contains(h, "done-printing") })
	x50, x51 := strings.Repeat("x", 50), strings.Repeat("x", 51)
	if !strings.Contains(s.HTML, x50) || strings.Contains(s.HTML, x51) {
		t.Errorf("100 x's on a 50-column screen do not wrap at 50: %q", s.HTML)
	}
	// 30 rows, two of x's and the last line: rows 1..21 scrolled off.
	if !strings.Contains(s.HTML, "row-30") || strings.Contains(s.HTML, "row-10") || strings.Contains(s.HTML, "row-21\n") {
		t.Errorf("a 12-row screen shows rows that scrolled off: %q", s.HTML)
	}
	if s.Cols != 50 || s.Rows != 12 {
		t.Errorf("screen size %d×%d, want 50×12", s.Cols, s.Rows)
	}
	tl.do("POST", "/api/pty/sized/interrupt", `{}`)
}

// execWait runs cmd as a block of conv and waits for its end.
func (tl *testLab) execWait(conv, cmd string) string {
	tl.t.Helper()
	b, _ := json.Marshal(map[string]string{"cmd": cmd})
	r := tl.do("POST", "/api/pty/"+conv+"/exec_block", string(b))
	if r.status != 200 {
		tl.t.Fatalf("exec_block: %d %s", r.status, r.body)
	}
	id, _ := r.json(tl.t)["block_id"].(string)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := tl.do("GET", "/api/pty/"+conv+"/blocks/"+id, "")
		var br struct {
			Block struct {
				TsEnd int64 `json:"ts_end"`
			} `json:"block"`
		}
		json.Unmarshal(r.body, &br)
		if br.Block.TsEnd != 0 {
			return id
		}
		if time.Now().After(deadline) {
			tl.t.Fatalf("block %s never ended: %s", id, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type recordingAnswer struct {
	Duration int64 `json:"duration"`
	Cols     int   `json:"cols"`
	Rows     int   `json:"rows"`
	Partial  bool  `json:"partial"`
	Frames   []struct {
		T   int64 `json:"t"`
		End int   `json:"end"`
	} `json:"frames"`
	Frame int    `json:"frame"`
	HTML  string `json:"html"`
}

func (tl *testLab) recording(path string) recordingAnswer {
	tl.t.Helper()
	r := tl.do("GET", path, "")
	if r.status != 200 {
		tl.t.Fatalf("%s: %d %s", path, r.status, r.body)
	}
	var a recordingAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		tl.t.Fatal(err)
	}
	return a
}

// TestConsoleConversationPlayback: a whole conversation — every block,
// each shown as "$ cmd" and its output — is a recording whose frames are
// the terminal at the times the log recorded; the terminal at a time
// shows what had been printed by then and nothing after; one block's
// recording holds that block only.
func TestConsoleConversationPlayback(t *testing.T) {
	tl := newSizedPtyLab(t, 90, 30)
	tl.execWait("play", "echo first-$((1+1))")
	tick := tl.execWait("play", "for i in 1 2 3; do echo tick-$i; sleep 0.3; done")

	rec := tl.recording("/api/console/pty/play/recording")
	if rec.Partial || rec.Cols != 90 || rec.Rows != 30 || len(rec.Frames) < 4 {
		t.Fatalf("recording: partial %v, %d×%d, %d frames", rec.Partial, rec.Cols, rec.Rows, len(rec.Frames))
	}
	for _, want := range []string{"$ echo first-$((1+1))", "first-2", "$ for i in 1 2 3", "tick-1", "tick-3"} {
		if !strings.Contains(rec.HTML, want) {
			t.Errorf("the end of the conversation lacks %q: %q", want, rec.HTML)
		}
	}
	if rec.Duration < 550 {
		t.Errorf("a conversation with 0.6 s of sleeps lasts %d ms", rec.Duration)
	}
	// The terminal at each frame's time: tick-1 shows 0.6 s before tick-3.
	var t1, t3 int64 = -1, -1
	for i, f := range rec.Frames {
		a := tl.recording(fmt.Sprintf("/api/console/pty/play/recording?t=%d", f.T))
		if a.Frame != i {
			t.Fatalf("t=%d is frame %d, want %d", f.T, a.Frame, i)
		}
		if t1 < 0 && strings.Contains(a.HTML, "tick-1") {
			t1 = f.T
			if strings.Contains(a.HTML, "tick-2") || strings.Contains(a.HTML, "tick-3") {
				t.Fatalf("at %d ms the terminal shows later output: %q", f.T, a.HTML)
			}
		}
		if t3 < 0 && strings.Contains(a.HTML, "tick-3") {
			t3 = f.T
		}
	}
	if t1 < 0 || t3-t1 < 500 {
		t.Fatalf("tick-1 at %d ms, tick-3 at %d ms: not the times of the log", t1, t3)
	}
	if a := tl.recording("/api/console/pty/play/recording?t=0"); strings.Contains(a.HTML, "tick-") {
		t.Fatalf("the start shows the end: %q", a.HTML)
	}
	// One block: its command and output only.
	b := tl.recording("/api/console/pty/play/recording?block=" + tick)
	if !strings.Contains(b.HTML, "tick-3") || strings.Contains(b.HTML, "first-2") || b.Cols != 90 {
		t.Fatalf("block recording (%d cols): %q", b.Cols, b.HTML)
	}
	for _, bad := range []string{"?t=-1", "?t=x", "?block=" + strings.Repeat("b", 300)} {
		if r := tl.do("GET", "/api/console/pty/play/recording"+bad, ""); r.status != 400 {
			t.Errorf("recording%s: %d %s", bad, r.status, r.body)
		}
	}
	if r := tl.do("GET", "/api/console/pty/play/recording?block=blk_nope", ""); r.status != 404 {
		t.Errorf("unknown block: %d %s", r.status, r.body)
	}
	// A conversation that never had a terminal: not found, at once (not a
	// scan of the log for its events).
	t0 := time.Now()
	if r := tl.do("GET", "/api/console/pty/nope/recording", ""); r.status != 404 || r.code() != CodeNotFound {
		t.Errorf("unknown conversation: %d %s", r.status, r.body)
	}
	if r := tl.do("GET", "/api/console/pty/nope/playback", ""); r.status != 404 {
		t.Errorf("unknown conversation's playback: %d %s", r.status, r.body)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("unknown conversations answered in %v", d)
	}
}

// sseEvent is one event of a stream and when it arrived.
type sseEvent struct {
	name, data string
	at         time.Time
}

// readPlaybackSSE reads events from body until end (or the stream ends).
func readPlaybackSSE(t *testing.T, body io.Reader, out chan<- sseEvent) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case line == "":
			if ev.name != "" {
				ev.at = time.Now()
				out <- ev
			}
			ev = sseEvent{}
		}
	}
	close(out)
}

// TestConsolePlaybackStream: the server plays the recording: one frame at
// each frame's time (the gaps the log recorded, at speed), rendered, then
// end; a fifth playback while four run is refused BUSY; a bad speed is
// refused.
func TestConsolePlaybackStream(t *testing.T) {
	tl := newSizedPtyLab(t, 80, 24)
	tl.execWait("stream", "for i in 1 2 3; do echo beat-$i; sleep 0.4; done")
	open := func(q string) (*http.Response, chan sseEvent) {
		req, _ := http.NewRequest("GET", tl.hs.URL+"/api/console/pty/stream/playback"+q, nil)
		req.Header.Set("X-CM-LAB-TOKEN", tl.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan sseEvent, 1000)
		if res.StatusCode == 200 {
			go readPlaybackSSE(t, res.Body, ch)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res, ch
	}
	res, ch := open("?from=0&speed=1")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("playback: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var got []sseEvent
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-ch:
			if !ok {
				done = true
				break
			}
			got = append(got, ev)
			done = ev.name == "end"
		case <-timeout:
			t.Fatalf("the playback did not end: %d events", len(got))
		}
	}
	if len(got) < 4 || got[0].name != "meta" || got[len(got)-1].name != "end" {
		t.Fatalf("events: %v", got)
	}
	first := func(word string) (int64, time.Time) {
		for _, ev := range got {
			var f struct {
				T    int64  `json:"t"`
				HTML string `json:"html"`
			}
			if ev.name == "frame" && json.Unmarshal([]byte(ev.data), &f) == nil && strings.Contains(f.HTML, word) {
				return f.T, ev.at
			}
		}
		t.Fatalf("no frame shows %q: %v", word, got)
		return 0, time.Time{}
	}
	t1, at1 := first("beat-1")
	t3, at3 := first("beat-3")
	if t3-t1 < 700 {
		t.Fatalf("beat-1 at %d ms, beat-3 at %d ms in the recording", t1, t3)
	}
	// Played at the recorded pace (a little slack for a loaded machine).
	if wall := at3.Sub(at1); wall < time.Duration(t3-t1-100)*time.Millisecond {
		t.Fatalf("frames %d ms apart in the recording arrived %v apart", t3-t1, wall)
	}
	res.Body.Close()
	// The place of the ended playback is given back.
	for deadline := time.Now().Add(10 * time.Second); len(tl.srv.console.playing) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d playback places still held after the stream ended", len(tl.srv.console.playing))
		}
	}

	// Four slow playbacks hold every place: a fifth is refused.
	for i := 0; i < playbackMax; i++ {
		res, ch := open("?speed=0.25")
		if res.StatusCode != 200 {
			t.Fatalf("playback %d: %d", i, res.StatusCode)
		}
		select {
		case ev := <-ch:
			if ev.name != "meta" {
				t.Fatalf("first event %q", ev.name)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no meta")
		}
	}
	if r := tl.do("GET", "/api/console/pty/stream/playback", ""); r.status != 409 || r.code() != CodeBusy {
		t.Fatalf("a fifth playback: %d %s", r.status, r.body)
	}
	if r := tl.do("GET", "/api/console/pty/stream/recording", ""); r.status != 409 || r.code() != CodeBusy {
		t.Fatalf("a recording while four play: %d %s", r.status, r.body)
	}
	for _, bad := range []string{"?speed=100", "?speed=0", "?speed=x", "?from=-5"} {
		if r := tl.do("GET", "/api/console/pty/stream/playback"+bad, ""); r.status != 400 {
			t.Errorf("playback%s: %d %s", bad, r.status, r.body)
		}
	}
}

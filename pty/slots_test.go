package pty_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
)

// newBridgeOpts is newBridge with manager options of the test's choosing.
func newBridgeOpts(t *testing.T, opts pty.Options) *bridge {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	opts.Dir = h.Dir
	mgr, err := pty.NewManager(eng, opts)
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: "127.0.0.1:0", OperatorToken: testToken, SessionID: "lab_test", Pty: mgr})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b := &bridge{t: t, home: h, eng: eng, mgr: mgr, srv: hs, base: hs.URL, conv: "conv1"}
	t.Cleanup(b.close)
	return b
}

// slots returns GET /api/pty: conversation id → mode of each running shell.
func (b *bridge) slots() map[string]string {
	b.t.Helper()
	code, out := b.call("GET", "/api/pty", "", nil)
	if code != 200 {
		b.t.Fatalf("GET /api/pty: %d %v", code, out)
	}
	m := map[string]string{}
	for _, x := range out["shells"].([]any) {
		s := x.(map[string]any)
		m[s["conversation_id"].(string)] = s["mode"].(string)
	}
	return m
}

// sessionEnds counts pty.session.ended events per reason in the log.
func (b *bridge) sessionEnds() map[string]int {
	b.t.Helper()
	b.barrier()
	n := map[string]int{}
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			b.t.Fatal(err)
		}
		if ev.Type == events.TypePtySessionEnded && ev.Stream != "test-barrier" {
			d, _ := events.DecodeAs[*events.PtySessionEnded](ev)
			n[d.Reason]++
		}
	}
	return n
}

// TestEndSessionFreesSlot: with MaxShells 2, a third conversation is BUSY
// until end_session ends one of the two shells; GET /api/pty lists them.
func TestEndSessionFreesSlot(t *testing.T) {
	b := newBridgeOpts(t, pty.Options{MaxShells: 2, IdleTimeout: -1})
	for _, c := range []string{"a", "b"} {
		b.conv = c
		b.execWait("true")
	}
	if s := b.slots(); len(s) != 2 || s["a"] != "idle" || s["b"] != "idle" {
		t.Fatalf("slots = %v", s)
	}
	code, r := b.call("POST", "/api/pty/c/exec_block", "", map[string]any{"cmd": "true"})
	if code != 409 || r["error"].(map[string]any)["code"] != "BUSY" || !strings.Contains(r["error"].(map[string]any)["context"].(map[string]any)["fix"].(string), "end_session") {
		t.Fatalf("third conversation = %d %v", code, r)
	}
	b.conv = "a"
	e := b.post("end_session", map[string]any{})
	if e["shell_ended"] != true || e["ended"] != false || e["mode"] != "idle" {
		t.Fatalf("end_session = %v", e)
	}
	if s := b.slots(); len(s) != 1 || s["b"] != "idle" {
		t.Fatalf("slots after end = %v", s)
	}
	b.conv = "c"
	if blk := b.execWait("echo third"); blk["status"] != "completed" {
		t.Fatalf("third conversation after end: %v", blk)
	}
	// The ended conversation gets a new shell on its next exec (the slot
	// of c is taken, so end b first).
	b.conv = "b"
	b.post("end_session", map[string]any{})
	b.conv = "a"
	if blk := b.execWait("echo again"); blk["status"] != "completed" {
		t.Fatalf("ended conversation again: %v", blk)
	}
	if n := b.sessionEnds(); n["end_session"] != 2 {
		t.Fatalf("session ends = %v", n)
	}
	b.checkLifecycles()
}

// TestIdleShellsReaped: an idle conversation loses its shell after
// IdleTimeout; a running block is never reaped.
func TestIdleShellsReaped(t *testing.T) {
	b := newBridgeOpts(t, pty.Options{IdleTimeout: 300 * time.Millisecond})
	b.conv = "idle1"
	b.execWait("true")
	b.conv = "busy1"
	r := b.post("exec_block", map[string]any{"cmd": "sleep 2; echo woke"})
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := b.slots()
		if _, ok := s["idle1"]; !ok {
			if s["busy1"] != "block_running" {
				t.Fatalf("slots = %v: the running block's shell went too", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle shell not reaped: %v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	blk := waitBlockEnd(t, b, r["block_id"].(string))
	if blk["status"] != "completed" {
		t.Fatalf("block under the reaper: %v", blk)
	}
	if n := b.sessionEnds(); n["idle"] < 1 {
		t.Fatalf("session ends = %v", n)
	}
	b.conv = "idle1"
	if blk := b.execWait("echo back"); blk["status"] != "completed" {
		t.Fatalf("reaped conversation again: %v", blk)
	}
}

// TestInterrupt: interrupt types Ctrl+C for the running block and returns
// at once; the block ends cancelled with exit 130. With nothing running it
// does nothing.
func TestInterrupt(t *testing.T) {
	b := newBridge(t)
	r := b.post("exec_block", map[string]any{"cmd": "sleep 60"})
	waitForeground(t, b, "sleep")
	i := b.post("interrupt", map[string]any{})
	if i["interrupted"] != true || i["block_id"] != r["block_id"] {
		t.Fatalf("interrupt = %v", i)
	}
	blk := waitBlockEnd(t, b, r["block_id"].(string))
	if blk["status"] != "cancelled" || blk["reason"] != "interrupted" || num(blk["exit_code"]) != 130 {
		t.Fatalf("interrupted block = %v", blk)
	}
	if i := b.post("interrupt", map[string]any{}); i["interrupted"] != false {
		t.Fatalf("idle interrupt = %v", i)
	}
	if st := b.get("status"); st["shell_alive"] != true {
		t.Fatalf("interrupt ended the shell: %v", st)
	}
	b.checkLifecycles()
}

// TestFollowBlockOutput: with wait_ms the block output route waits for
// output past offset or the END, so a reader sees each line as it comes.
func TestFollowBlockOutput(t *testing.T) {
	b := newBridge(t)
	b.execWait("true") // the shell is up
	r := b.post("exec_block", map[string]any{"cmd": "echo one; read x; echo two"})
	id := r["block_id"].(string)
	out := b.get("blocks/" + id + "/output?offset=0&wait_ms=20000")
	if out["data"] != "one\n" || out["complete"] != false {
		t.Fatalf("first follow = %v", out)
	}
	// Nothing new: the wait ends at wait_ms with no data.
	start := time.Now()
	same := b.get("blocks/" + id + "/output?offset=4&wait_ms=200")
	if same["data"] != "" || num(same["resume_cursor"]) != 4 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("idle follow = %v after %v", same, time.Since(start))
	}
	b.post("send", map[string]any{"data": "\n"})
	var got string
	cur := int64(4)
	for {
		o := b.get("blocks/" + id + "/output?offset=" + itoa(cur) + "&wait_ms=20000")
		got += o["data"].(string)
		cur = num(o["resume_cursor"])
		if o["complete"] == true && cur == num(o["size"]) {
			break
		}
	}
	if got != "two\n" {
		t.Fatalf("rest = %q", got)
	}
}

// TestWaitFromEnd: a wait without from_cursor scans from the end of the
// spool when it arrives, so old output never matches.
func TestWaitFromEnd(t *testing.T) {
	b := newBridge(t)
	b.execWait("echo OLD-TEXT")
	w := b.post("wait_for", map[string]any{"match": "OLD-TEXT", "timeout_ms": 200})
	if w["matched"] != false || num(w["resume_cursor"]) != num(b.get("status")["resume_cursor"]) {
		t.Fatalf("wait without from_cursor matched old output: %v", w)
	}
	p := b.post("wait_prompt", map[string]any{"timeout_ms": 200})
	if p["matched"] != false {
		t.Fatalf("wait_prompt without from_cursor matched an old prompt: %v", p)
	}
	// An explicit 0 still scans from the start.
	if w := b.post("wait_for", map[string]any{"match": "OLD-TEXT", "from_cursor": 0, "timeout_ms": 200}); w["matched"] != true {
		t.Fatalf("from_cursor 0 = %v", w)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

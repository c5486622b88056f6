package pty_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
)

// TestExpectSend: the wait and the send are one step; a retry with the
// same request id types nothing more; a timeout types nothing.
func TestExpectSend(t *testing.T) {
	b := newBridge(t)
	ir := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	body := map[string]any{"expect": "Guess a number", "send": "7\r", "from_cursor": ir["resume_cursor"], "timeout_ms": 20000}
	var first map[string]any
	for i := 0; i < 2; i++ {
		code, r := b.call("POST", "/api/pty/conv1/expect_send", "req-es-1", body)
		if code != 200 || r["matched"] != true || r["match_text"] != "Guess a number" {
			t.Fatalf("expect_send %d = %d %v", i, code, r)
		}
		if first == nil {
			first = r
		} else if fmt.Sprint(first) != fmt.Sprint(r) {
			t.Fatalf("retry answered %v, first %v", r, first)
		}
	}
	p := b.post("wait_prompt", map[string]any{"from_cursor": first["resume_cursor"], "timeout_ms": 20000})
	if p["matched"] != true || num(p["extra"].(map[string]any)["exit"]) != 0 {
		t.Fatalf("wait_prompt = %v", p)
	}
	sp := string(b.spool())
	if strings.Count(sp, "Correct!") != 1 || strings.Contains(sp, "command not found") {
		t.Fatalf("spool %q", sp)
	}
	// Timeout: nothing typed, resume_cursor = spool size.
	size := num(b.get("status")["resume_cursor"])
	r := b.post("expect_send", map[string]any{"expect": "never-printed", "send": "echo TYPED\n", "from_cursor": size, "timeout_ms": 200})
	if r["matched"] != false || r["error"] != "timeout" || num(r["resume_cursor"]) != size {
		t.Fatalf("expect_send timeout = %v", r)
	}
	if strings.Contains(string(b.spool()), "TYPED") {
		t.Fatal("typed after a timeout")
	}
}

// TestConcurrentExecs: of many simultaneous exec_block calls exactly one
// runs, the others are refused busy; concurrent duplicates of one request
// id act once.
func TestConcurrentExecs(t *testing.T) {
	b := newBridge(t)
	b.execWait("true")
	const n = 8
	var wg sync.WaitGroup
	codes := make([]int, n)
	outs := make([]map[string]any, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i], outs[i] = b.call("POST", "/api/pty/conv1/exec_block", "", map[string]any{"cmd": fmt.Sprintf("sleep 0.5; echo RUN-%d", i)})
		}(i)
	}
	wg.Wait()
	ok := 0
	for i := range codes {
		switch {
		case codes[i] == 200 && outs[i]["ok"] == true:
			ok++
		case codes[i] == 409 && outs[i]["error"] == "busy":
		default:
			t.Fatalf("exec %d = %d %v", i, codes[i], outs[i])
		}
	}
	if ok != 1 {
		t.Fatalf("%d execs ran, want 1", ok)
	}
	b.post("wait_prompt", map[string]any{"from_cursor": 0, "timeout_ms": 20000})
	// Same request id from many clients at once: one block.
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i], outs[i] = b.call("POST", "/api/pty/conv1/exec_block", "req-same", map[string]any{"cmd": "echo SAME"})
		}(i)
	}
	wg.Wait()
	for i := range codes {
		if codes[i] != 200 || outs[i]["block_id"] != outs[0]["block_id"] {
			t.Fatalf("dup %d = %d %v (first %v)", i, codes[i], outs[i], outs[0])
		}
	}
	waitBlockEnd(t, b, outs[0]["block_id"].(string))
	if c := strings.Count(string(b.spool()), "SAME\n"); c != 1 {
		t.Fatalf("SAME printed %d times", c)
	}
	if final := b.checkLifecycles(); len(final) != 3 {
		t.Fatalf("%d blocks, want 3", len(final))
	}
}

// TestBlocksAndSearch: blocks since, get, output slices and search.
func TestBlocksAndSearch(t *testing.T) {
	b := newBridge(t)
	b1 := b.execWait("echo alpha one")
	b2 := b.execWait("echo beta two; echo alpha three")
	all := b.get("blocks")["blocks"].([]any)
	if len(all) != 2 || all[0].(map[string]any)["block_id"] != b1["block_id"] {
		t.Fatalf("blocks = %v", all)
	}
	since := b.get("blocks?since=1")["blocks"].([]any)
	if len(since) != 1 || since[0].(map[string]any)["block_id"] != b2["block_id"] {
		t.Fatalf("blocks?since=1 = %v", since)
	}
	id2 := b2["block_id"].(string)
	out := b.get("blocks/" + id2 + "/output?offset=5&max_bytes=4")
	if out["data"] != "two\n" || num(out["cursor"]) != 5 || num(out["resume_cursor"]) != 9 || num(out["size"]) != 21 {
		t.Fatalf("output slice = %v", out)
	}
	s := b.get("search?q=alpha")
	hits := s["matches"].([]any)
	if len(hits) != 2 || hits[0].(map[string]any)["line"] != "alpha one" || hits[1].(map[string]any)["block_id"] != id2 {
		t.Fatalf("search = %v", s)
	}
	s = b.get("search?q=alpha&block_id=" + id2)
	if hits := s["matches"].([]any); len(hits) != 1 || hits[0].(map[string]any)["line"] != "alpha three" {
		t.Fatalf("search in block = %v", s)
	}
	for _, bad := range []string{"blocks/blk_nope", "blocks/" + id2 + "/output?offset=99", "search?q="} {
		code, r := b.call("GET", "/api/pty/conv1/"+bad, "", nil)
		if code/100 != 4 || r["error"] == nil {
			t.Fatalf("%s = %d %v", bad, code, r)
		}
	}
	// Bad cursors and ids are refused with the envelope.
	for _, c := range []struct {
		op   string
		body map[string]any
		code string
	}{
		{"wait_for", map[string]any{"match": "x", "from_cursor": 1 << 40}, "INVALID_CURSOR"},
		{"wait_for", map[string]any{"match": "x", "from_cursor": -1}, "INVALID_CURSOR"},
		{"wait_for", map[string]any{"match": "(", "match_type": "regex"}, "INVALID_ARGUMENT"},
		{"wait_for", map[string]any{"match": "x", "match_type": "glob"}, "INVALID_ARGUMENT"},
		{"read_spool", map[string]any{"from_cursor": 1 << 40}, "INVALID_CURSOR"},
		{"exec_block", map[string]any{}, "INVALID_ARGUMENT"},
	} {
		code, r := b.call("POST", "/api/pty/conv1/"+c.op, "", c.body)
		if code != 400 || r["error"].(map[string]any)["code"] != c.code {
			t.Fatalf("%s %v = %d %v", c.op, c.body, code, r)
		}
	}
	code, r := b.call("POST", "/api/pty/bad..id%2F/status", "", nil)
	if code/100 != 4 {
		t.Fatalf("bad conversation id = %d %v", code, r)
	}
	// Token required, GET included.
	req := b.srv.URL + "/api/pty/conv1/status"
	resp, err := b.srv.Client().Get(req)
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("GET without token = %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestResetKeepsHistory: reset records pty.session.reset, starts a new
// shell, keeps spool and blocks, and closes a running block once.
func TestResetKeepsHistory(t *testing.T) {
	b := newBridge(t)
	b.execWait("echo before-reset")
	before := b.spool()
	r := b.post("exec_block", map[string]any{"cmd": "sleep 60"})
	rs := b.post("reset", map[string]any{})
	if rs["ok"] != true || rs["shell_id"] == rs["old_shell_id"] || num(rs["resume_cursor"]) < int64(len(before)) {
		t.Fatalf("reset = %v", rs)
	}
	after := b.spool()
	if string(after[:len(before)]) != string(before) {
		t.Fatal("spool rewritten by reset")
	}
	blk := b.get("blocks/" + r["block_id"].(string))["block"].(map[string]any)
	if blk["status"] != "cancelled" || blk["reason"] != "reset" {
		t.Fatalf("running block after reset = %v", blk)
	}
	resets := 0
	b.barrier()
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == events.TypePtySessionReset {
			resets++
		}
	}
	if resets != 1 {
		t.Fatalf("%d pty.session.reset events", resets)
	}
	if blk := b.execWait("echo after-reset"); blk["status"] != "completed" || blk["shell_id"] != rs["shell_id"] {
		t.Fatalf("after reset = %v", blk)
	}
	if final := b.checkLifecycles(); len(final) != 3 {
		t.Fatalf("%d blocks", len(final))
	}
}

// TestSendToProgramThatDoesNotRead: input the program never reads (more
// than the terminal's line buffer) neither blocks the request nor wedges
// the conversation: end_session still ends it.
func TestSendToProgramThatDoesNotRead(t *testing.T) {
	b := newBridge(t)
	b.post("exec_interactive", map[string]any{"cmd": "sleep 60"})
	waitForeground(t, b, "sleep 60")
	done := make(chan map[string]any, 1)
	go func() {
		_, r := b.call("POST", "/api/pty/conv1/send", "", map[string]any{"data": strings.Repeat("a", 200000)})
		done <- r
	}()
	select {
	case r := <-done:
		if r["ok"] != true {
			t.Fatalf("send = %v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("send blocked")
	}
	e := b.post("end_session", map[string]any{"grace_ms": 2000})
	if e["ended"] != true || e["mode"] != "idle" {
		t.Fatalf("end_session = %v", e)
	}
	if blk := b.execWait("echo still-usable"); blk["status"] != "completed" {
		t.Fatalf("after = %v", blk)
	}
}

// TestRequestIDOtherConversation: one request id on another conversation
// is a reused key, not a replay of the first conversation's answer.
func TestRequestIDOtherConversation(t *testing.T) {
	b := newBridge(t)
	body := map[string]any{"cmd": "echo X"}
	if code, r := b.call("POST", "/api/pty/conv1/exec_block", "req-x", body); code != 200 {
		t.Fatalf("%d %v", code, r)
	}
	code, r := b.call("POST", "/api/pty/conv2/exec_block", "req-x", body)
	if code != 409 || r["error"].(map[string]any)["code"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("other conversation = %d %v", code, r)
	}
}

// TestMaxShells: a conversation past Options.MaxShells is refused BUSY.
func TestMaxShells(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := pty.NewManager(eng, pty.Options{Dir: h.Dir, MaxShells: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	defer mgr.Close(context.Background())
	for i, conv := range []string{"a", "b", "c"} {
		_, err := mgr.ExecBlock(context.Background(), conv, "true", "", pty.Request{})
		if i < 2 && err != nil || i == 2 && !errors.Is(err, pty.ErrTooManyShells) {
			t.Fatalf("conversation %s: %v", conv, err)
		}
	}
}

package pty_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/pty"
)

// Issue 25: the terminal as agents drive it.

// TestPromptWaitNeverOlderThanBlock (issue 25 §1): on a new conversation,
// status (resume_cursor 0) → exec "sleep 1; echo finished" → wait_for
// prompt from 0 must not match the shell's first prompt: it returns only
// when the block has ended, with the block's prompt.
func TestPromptWaitNeverOlderThanBlock(t *testing.T) {
	b := newBridge(t)
	if st := b.get("status"); num(st["resume_cursor"]) != 0 {
		t.Fatalf("status of a new conversation = %v", st)
	}
	r := b.post("exec_block", map[string]any{"cmd": "sleep 1; echo finished"})
	id := r["block_id"].(string)
	if _, ok := r["resume_cursor"]; !ok {
		t.Fatalf("exec_block answered no resume_cursor: %v", r)
	}
	w := b.post("wait_for", map[string]any{"match_type": "prompt", "from_cursor": 0, "timeout_ms": 20000})
	blk := b.get("blocks/" + id)["block"].(map[string]any)
	if w["matched"] != true || blk["status"] != "completed" {
		t.Fatalf("prompt wait from 0 = %v while the block is %v", w, blk["status"])
	}
	if ex, _ := w["extra"].(map[string]any); ex["block_id"] != id {
		t.Fatalf("the prompt matched is not the block's: %v", w)
	}
	// wait_prompt from 0 after it ended answers the same prompt.
	p := b.post("wait_prompt", map[string]any{"from_cursor": 0, "timeout_ms": 2000})
	if num(p["resume_cursor"]) != num(w["resume_cursor"]) {
		t.Fatalf("wait_prompt from 0 = %v, wait_for prompt = %v", p, w)
	}
}

// TestCursorFromEveryInput (issue 25 §1): exec, exec_interactive, send,
// expect_send and interrupt answer the resume cursor taken before their
// input: a wait from it sees the whole reaction.
func TestCursorFromEveryInput(t *testing.T) {
	b := newBridge(t)
	b.execWait("echo warm")
	size := num(b.get("status")["resume_cursor"])
	r := b.post("exec_block", map[string]any{"cmd": "echo one"})
	if num(r["resume_cursor"]) != size {
		t.Fatalf("exec resume_cursor = %v, spool was %d", r["resume_cursor"], size)
	}
	if w := b.post("wait_for", map[string]any{"match": "one", "from_cursor": r["resume_cursor"], "timeout_ms": 20000}); w["matched"] != true {
		t.Fatalf("wait from exec's cursor = %v", w)
	}
	b.post("wait_prompt", map[string]any{"from_cursor": r["resume_cursor"], "timeout_ms": 20000})
	ir := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	w := b.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	size = num(b.get("status")["resume_cursor"])
	s := b.post("send", map[string]any{"data": "11\r"})
	if s["ok"] != true || num(s["resume_cursor"]) != size {
		t.Fatalf("send = %v, spool was %d", s, size)
	}
	if w := b.post("wait_for", map[string]any{"match": "Out of range", "from_cursor": s["resume_cursor"], "timeout_ms": 20000}); w["matched"] != true {
		t.Fatalf("wait from send's cursor = %v", w)
	}
	b.post("wait_prompt", map[string]any{"from_cursor": w["resume_cursor"], "timeout_ms": 20000})
	// interrupt: its cursor precedes the prompt the Ctrl+C brings back.
	b.post("exec_interactive", map[string]any{"cmd": "sleep 30"})
	// Interrupt the running program (a Ctrl+C that reaches bash before it
	// has started the command is another story): wait until it runs.
	for deadline := time.Now().Add(20 * time.Second); b.get("status")["foreground"] != "sleep 30"; {
		if time.Now().After(deadline) {
			t.Fatal("sleep 30 never ran in the foreground")
		}
		time.Sleep(10 * time.Millisecond)
	}
	size = num(b.get("status")["resume_cursor"])
	in := b.post("interrupt", map[string]any{})
	if in["interrupted"] != true || num(in["resume_cursor"]) != size {
		t.Fatalf("interrupt = %v, spool was %d", in, size)
	}
	if p := b.post("wait_prompt", map[string]any{"from_cursor": in["resume_cursor"], "timeout_ms": 20000}); p["matched"] != true {
		t.Fatalf("wait_prompt from interrupt's cursor = %v", p)
	}
}

// TestExecWait (issue 25 §1): exec_wait answers when the block ended, with
// its exit code, its clean output and the cursor after its prompt; a
// timeout says done false; a retry with the same request id runs nothing.
func TestExecWait(t *testing.T) {
	b := newBridge(t)
	code, r := b.call("POST", "/api/pty/"+b.conv+"/exec_wait", "ew-1", map[string]any{"cmd": "echo out; echo err >&2; exit_3() { return 3; }; exit_3", "timeout_ms": 20000})
	if code != 200 || r["done"] != true || r["status"] != "failed" || num(r["exit_code"]) != 3 || r["output"] != "out\nerr\n" || r["output_truncated"] != false {
		t.Fatalf("exec_wait = %d %v", code, r)
	}
	st := b.get("status")
	if num(r["resume_cursor"]) != num(st["resume_cursor"]) || st["mode"] != "idle" {
		t.Fatalf("resume_cursor %v, the spool ends at %v (mode %v)", r["resume_cursor"], st["resume_cursor"], st["mode"])
	}
	// The same request id: the same block, run once.
	code, again := b.call("POST", "/api/pty/"+b.conv+"/exec_wait", "ew-1", map[string]any{"cmd": "echo out; echo err >&2; exit_3() { return 3; }; exit_3", "timeout_ms": 20000})
	if code != 200 || again["block_id"] != r["block_id"] || again["output"] != "out\nerr\n" {
		t.Fatalf("retry = %d %v", code, again)
	}
	if n := len(b.get("blocks")["blocks"].([]any)); n != 1 {
		t.Fatalf("%d blocks after a retried exec_wait, want 1", n)
	}
	// Bounded output with the offset to read more.
	_, big := b.call("POST", "/api/pty/"+b.conv+"/exec_wait", "", map[string]any{"cmd": "seq 1 1000", "max_bytes": 100, "timeout_ms": 20000})
	if big["done"] != true || big["output_truncated"] != true || num(big["output_next_offset"]) != 100 || len(big["output"].(string)) != 100 || num(big["output_bytes"]) != 3893 {
		t.Fatalf("bounded exec_wait = %v", big)
	}
	// A timeout: not done, still running; the wait_prompt from its
	// cursor returns when the block ends.
	_, slow := b.call("POST", "/api/pty/"+b.conv+"/exec_wait", "", map[string]any{"cmd": "sleep 1; echo late", "timeout_ms": 100})
	if slow["done"] != false || slow["status"] != "running" || slow["exit_code"] != nil {
		t.Fatalf("timed-out exec_wait = %v", slow)
	}
	p := b.post("wait_prompt", map[string]any{"from_cursor": slow["resume_cursor"], "timeout_ms": 20000})
	if ex, _ := p["extra"].(map[string]any); p["matched"] != true || ex["block_id"] != slow["block_id"] {
		t.Fatalf("wait_prompt after a timed-out exec_wait = %v", p)
	}
	// Busy: the seed's refusal, 409.
	b.post("exec_block", map[string]any{"cmd": "sleep 2"})
	code, busy := b.call("POST", "/api/pty/"+b.conv+"/exec_wait", "", map[string]any{"cmd": "true"})
	if code != 409 || busy["error"] != "busy" {
		t.Fatalf("exec_wait while busy = %d %v", code, busy)
	}
}

// TestUnknownConversation (issue 25 §5): a wait or read on a conversation
// that never had a terminal is NOT_FOUND at once, not a timeout.
func TestUnknownConversation(t *testing.T) {
	b := newBridge(t)
	b.execWait("true")
	for _, op := range []string{"wait_for", "wait_prompt", "read_spool", "expect_send"} {
		start := time.Now()
		code, r := b.call("POST", "/api/pty/no-such-conv/"+op, "", map[string]any{"match": "x", "match_type": "prompt", "expect": "x", "send": "y", "from_cursor": 0, "timeout_ms": 10000})
		e, _ := r["error"].(map[string]any)
		if code != 404 || e["code"] != "NOT_FOUND" || time.Since(start) > 5*time.Second {
			t.Fatalf("%s on an unknown conversation = %d %v after %s", op, code, r, time.Since(start))
		}
	}
}

// TestCleanView (issue 25 §3): a 1,000-line command whose terminal echo
// was turned on (so its exec line is echoed): what an agent reads — the
// exec_wait output, read_spool, wait_for and wait_prompt answers, the
// block's output — holds no sentinel and no wrapper, exactly; the raw
// view and the spool hold them all.
func TestCleanView(t *testing.T) {
	b := newBridge(t)
	b.clean = true
	b.execWait("stty echo") // a program that leaves echo on
	var want strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	cmd := `for i in $(seq 1 1000); do echo "line $i"; done`
	_, r := b.call("POST", "/api/pty/"+b.conv+"/exec_wait", "", map[string]any{"cmd": cmd, "timeout_ms": 20000, "max_bytes": 1 << 20})
	if r["done"] != true || r["output"] != want.String() {
		t.Fatalf("exec_wait output (%d bytes) is not the 1,000 lines: %q", len(fmt.Sprint(r["output"])), head(fmt.Sprint(r["output"])))
	}
	raw := b.spool()
	prompts := bytes.Count(raw, []byte("__FWS_PROMPT__ "))
	wrappers := bytes.Count(raw, []byte("eval $'"))
	if prompts != 3 || wrappers != 1 {
		t.Fatalf("the spool holds %d sentinels and %d echoed wrappers, want 3 and 1", prompts, wrappers)
	}
	var got []string
	cur := int64(0)
	for {
		rd := b.post("read_spool", map[string]any{"from_cursor": cur, "max_bytes": 1000})
		got = append(got, rd["data"].(string))
		if num(rd["resume_cursor"]) == cur {
			break
		}
		cur = num(rd["resume_cursor"])
	}
	clean := strings.Join(got, "")
	if clean != want.String() {
		t.Fatalf("clean spool (%d bytes) = %q…, want the 1,000 lines", len(clean), head(clean))
	}
	w := b.post("wait_for", map[string]any{"match": "line 1000\n", "from_cursor": 0, "timeout_ms": 2000})
	p := b.post("wait_prompt", map[string]any{"from_cursor": 0, "timeout_ms": 2000})
	out := b.get("blocks/" + r["block_id"].(string) + "/output?max_bytes=1048576")
	received := fmt.Sprint(r, got, w, p, out)
	if n, m := strings.Count(received, "__FWS_PROMPT__"), strings.Count(received, "eval $'"); n != 0 || m != 0 {
		t.Fatalf("an agent received %d sentinels and %d wrappers", n, m)
	}
	if out["data"] != want.String() {
		t.Fatalf("block output = %q…", head(fmt.Sprint(out["data"])))
	}
	// raw:true shows everything.
	rr := b.post("read_spool", map[string]any{"from_cursor": 0, "max_bytes": 1 << 22, "raw": true})
	if rr["data"] != string(raw) {
		t.Fatalf("raw read_spool is not the spool")
	}
}

// TestCleanTranscriptShowsInput (issue 25 §3): what send typed appears in
// the clean view where it was typed; the asciicast shows it as input and
// echo, and holds no sentinel or wrapper.
func TestCleanTranscriptShowsInput(t *testing.T) {
	b := newBridge(t)
	b.clean = true
	ir := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	b.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	b.post("send", map[string]any{"data": "7\r"})
	b.post("wait_prompt", map[string]any{"from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	rd := b.post("read_spool", map[string]any{"from_cursor": ir["resume_cursor"], "max_bytes": 1 << 20})
	if rd["data"] != "Guess a number between 1 and 10: 7\nCorrect!\n" {
		t.Fatalf("clean transcript = %q", rd["data"])
	}
	b.barrier()
	var buf bytes.Buffer
	if _, err := pty.WriteAsciicastClean(&buf, b.conv, b.eng.Log().Events(1)); err != nil {
		t.Fatal(err)
	}
	cast := buf.String()
	if strings.Contains(cast, "__FWS_PROMPT__") || strings.Contains(cast, "eval $'") {
		t.Fatalf("clean asciicast holds internals:\n%s", cast)
	}
	if !strings.Contains(cast, `"i","7\r"]`) || !strings.Contains(cast, `"o","7\r\n"]`) || !strings.Contains(cast, `"o","$ `+guess(t)) {
		t.Fatalf("clean asciicast does not show the typing:\n%s", cast)
	}
}

// TestExecCwdIsBlockLocal (issue 25 §4): a block given cwd runs there; the
// conversation's directory is unchanged for later blocks, also when the
// command cd'ed; its exit code is the command's.
func TestExecCwdIsBlockLocal(t *testing.T) {
	b := newBridge(t)
	b.clean = true
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	start := strings.TrimSpace(b.run("pwd", "")["output"].(string))
	if r := b.run("pwd", dir); r["output"] != dir+"\n" {
		t.Fatalf("pwd with cwd = %v", r)
	}
	if r := b.run("pwd", ""); r["output"] != start+"\n" {
		t.Fatalf("pwd after a block with cwd = %v, want %s", r["output"], start)
	}
	if r := b.run("cd /; (exit 4)", dir); num(r["exit_code"]) != 4 {
		t.Fatalf("exit code with cwd = %v", r)
	}
	if r := b.run("pwd", ""); r["output"] != start+"\n" {
		t.Fatalf("pwd after a block that cd'ed = %v", r["output"])
	}
	if r := b.run("pwd", filepath.Join(dir, "missing")); num(r["exit_code"]) != 1 || !strings.Contains(r["output"].(string), "No such file or directory") {
		t.Fatalf("missing cwd = %v", r)
	}
	os.MkdirAll(filepath.Join(dir, "sub"), 0o700)
	if r := b.run("cd sub && pwd", dir); r["output"] != dir+"/sub\n" {
		t.Fatalf("cd within a block = %v", r)
	}
}

func (b *bridge) run(cmd, cwd string) map[string]any {
	b.t.Helper()
	code, r := b.call("POST", "/api/pty/"+b.conv+"/exec_wait", "", map[string]any{"cmd": cmd, "cwd": cwd, "timeout_ms": 20000})
	if code != 200 || r["done"] != true {
		b.t.Fatalf("exec_wait %q = %d %v", cmd, code, r)
	}
	return r
}

func head(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

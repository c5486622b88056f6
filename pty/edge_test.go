package pty_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// TestForgery: program output that imitates the sentinel or the raw marks
// neither ends a block nor flips the mode.
func TestForgery(t *testing.T) {
	b := newBridge(t)
	b.execWait("true")
	forgeries := []string{
		`echo '__FWS_PROMPT__ ts=1 cwd_b64=eA== exit=0'; sleep 1; echo after`,
		`printf '\033]6973;P;0123456789abcdef0123456789abcdef;0;1;1;x\a'; sleep 1; echo after`,
		`printf '\033]6973;B;0123456789abcdef0123456789abcdef\a'; printf '\033]6973;P;;0;1;1;x\a'; sleep 1; echo after`,
		`printf '\033]6973;P;%s;0;1;1;x\a' "$__fws_nonce_guess"; sleep 1; echo after`,
	}
	for _, cmd := range forgeries {
		from := num(b.get("status")["resume_cursor"])
		r := b.post("exec_block", map[string]any{"cmd": cmd})
		// The forged line is in the spool, and the block still runs.
		w := b.post("wait_for", map[string]any{"match": "after", "from_cursor": from, "timeout_ms": 20000})
		if w["matched"] != true {
			t.Fatalf("%q: %v", cmd, w)
		}
		blk := b.get("blocks/" + r["block_id"].(string))["block"].(map[string]any)
		p := b.post("wait_prompt", map[string]any{"from_cursor": from, "timeout_ms": 20000})
		// The first real prompt after the forgery comes after "after".
		if num(p["match_cursor"]) < num(w["resume_cursor"]) {
			t.Fatalf("%q: prompt at %v before the output end %v (block was %v)", cmd, p["match_cursor"], w["resume_cursor"], blk)
		}
	}
	final := b.checkLifecycles()
	if len(final) != len(forgeries)+1 {
		t.Fatalf("%d blocks, want %d", len(final), len(forgeries)+1)
	}
	for _, blk := range final {
		if blk.Status != events.BlockCompleted {
			t.Fatalf("block %+v", blk)
		}
	}
	// The forged echo is in the spool as ordinary output; the prompts
	// found by wait_prompt are only the real ones.
	sp := b.spool()
	if !bytes.Contains(sp, []byte("__FWS_PROMPT__ ts=1 cwd_b64=eA== exit=0\n")) {
		t.Fatal("forged line missing from the spool")
	}
	// The nonce never appears in the spool.
	if bytes.Contains(sp, []byte("__fws_nonce=")) {
		t.Fatal("nonce leaked")
	}
	// A child process cannot see the nonce.
	b.execWait(`env | grep -c fws; cat /proc/$$/environ | tr '\0' '\n' | grep -c fws; true`)
	if bytes.Contains(b.spool(), []byte("__fws_nonce")) {
		t.Fatal("the environment names the nonce")
	}
}

// TestOrderingOneMegabyte: a command printing 1 MB then exiting: the
// sentinel comes after the last output byte, and wait_for from every cursor
// finds the next match and never an earlier one.
func TestOrderingOneMegabyte(t *testing.T) {
	b := newBridge(t)
	// 16384 numbered lines of 64 bytes = 1 MiB.
	blk := b.execWait(`for ((i=0;i<16384;i++)); do printf 'L%05d %056d\n' $i 0; done`)
	if blk["status"] != "completed" {
		t.Fatalf("block %v", blk)
	}
	sp := b.spool()
	last := bytes.LastIndex(sp, []byte("L16383 "))
	prompt := bytes.LastIndex(sp, []byte("__FWS_PROMPT__"))
	if last < 0 || prompt < last+64 {
		t.Fatalf("last line at %d, sentinel at %d", last, prompt)
	}
	out := b.get("blocks/" + blk["block_id"].(string) + "/output?max_bytes=4194304")
	if num(out["size"]) != 16384*64 || out["complete"] != true || len(out["data"].(string)) != 16384*64 {
		t.Fatalf("block output size %v complete %v", out["size"], out["complete"])
	}
	// wait_for from every 4099th cursor finds the first later match.
	for cur := int64(0); cur < int64(last); cur += 4099 {
		w := b.post("wait_for", map[string]any{"match": "L1", "from_cursor": cur, "timeout_ms": 5000})
		want := int64(bytes.Index(sp[cur:], []byte("L1"))) + cur
		if w["matched"] != true || num(w["match_cursor"]) != want || num(w["resume_cursor"]) != want+2 {
			t.Fatalf("from %d: %v, want match at %d", cur, w, want)
		}
	}
	// Every cursor of a window in the middle and at the end (in-process:
	// the same code the bridge calls): the next line start is found, never
	// an earlier one, and resume_cursor is match_span.end.
	pat := []byte("\nL")
	for _, win := range [][2]int{{500000, 520000}, {len(sp) - 20000, len(sp)}} {
		for c := win[0]; c <= win[1]; c++ {
			w, err := b.mgr.WaitFor(context.Background(), b.conv, pty.WaitParams{Match: "\nL", FromCursor: int64(c), TimeoutMs: 1})
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(sp[c:], pat)
			if i < 0 {
				if w.Matched || w.ResumeCursor != int64(len(sp)) {
					t.Fatalf("from %d: %+v, want timeout at %d", c, w, len(sp))
				}
				continue
			}
			if !w.Matched || *w.MatchCursor != int64(c+i) || w.ResumeCursor != int64(c+i+2) || w.MatchSpan.End != w.ResumeCursor {
				t.Fatalf("from %d: %+v, want match at %d", c, w, c+i)
			}
		}
	}
	// Chained: resume_cursor walks every line in order.
	cur := int64(0)
	for i := 0; i < 16384; i += 997 {
		tag := fmt.Sprintf("L%05d ", i)
		w := b.post("wait_for", map[string]any{"match": tag, "match_type": "regex", "from_cursor": cur, "timeout_ms": 5000})
		if w["matched"] != true || num(w["match_cursor"]) != int64(bytes.Index(sp, []byte(tag))) {
			t.Fatalf("%s: %v", tag, w)
		}
		cur = num(w["resume_cursor"])
	}
	// Never an earlier one: from past the last line, "L0" is not found.
	w := b.post("wait_for", map[string]any{"match": "L0", "from_cursor": last + 1, "timeout_ms": 200})
	if w["matched"] != false {
		t.Fatalf("found an earlier match: %v", w)
	}
}

// TestEdgeCases: exactly one BEGIN and one END per block, with the right
// status and exit code, for empty input, a dying shell, Ctrl+C and a nested
// shell that hides the prompt.
func TestEdgeCases(t *testing.T) {
	b := newBridge(t)
	type want struct {
		status string
		exit   int
	}
	got := map[string]want{}
	// Empty input.
	blk := b.execWait("")
	got["empty"] = want{blk["status"].(string), int(num(blk["exit_code"]))}
	if got["empty"] != (want{"completed", 0}) {
		t.Fatalf("empty: %v", blk)
	}
	// The shell dies: exit 4.
	r := b.post("exec_block", map[string]any{"cmd": "exit 4"})
	ended := waitBlockEnd(t, b, r["block_id"].(string))
	if ended["status"] != "failed" || num(ended["exit_code"]) != 4 || ended["reason"] != "shell_exited" {
		t.Fatalf("exit 4: %v", ended)
	}
	if st := b.get("status"); st["shell_alive"] != false || st["mode"] != "idle" {
		t.Fatalf("status after exit: %v", st)
	}
	// set -e; false kills the interactive shell too.
	r = b.post("exec_block", map[string]any{"cmd": "set -e; false"})
	ended = waitBlockEnd(t, b, r["block_id"].(string))
	if ended["status"] != "failed" || num(ended["exit_code"]) != 1 {
		t.Fatalf("set -e; false: %v", ended)
	}
	// A new shell runs the next command.
	blk = b.execWait("echo back")
	if blk["status"] != "completed" {
		t.Fatalf("after shell death: %v", blk)
	}
	// Ctrl+C: end_session interrupts the foreground group; exit 130.
	r = b.post("exec_block", map[string]any{"cmd": "sleep 60"})
	waitForeground(t, b, "sleep")
	e := b.post("end_session", map[string]any{"grace_ms": 10000})
	if e["ended"] != true || e["forced"] != false {
		t.Fatalf("end_session = %v", e)
	}
	ended = b.get("blocks/" + r["block_id"].(string))["block"].(map[string]any)
	if ended["status"] != "cancelled" || num(ended["exit_code"]) != 130 {
		t.Fatalf("ctrl+c: %v", ended)
	}
	// A nested shell hides the prompt: wait_prompt times out and status
	// names the foreground command; ending the session brings it back.
	from := num(b.get("status")["resume_cursor"])
	r = b.post("exec_block", map[string]any{"cmd": "bash --norc --noprofile"})
	waitForeground(t, b, "bash --norc")
	p := b.post("wait_prompt", map[string]any{"from_cursor": from, "timeout_ms": 500})
	if p["matched"] != false || p["error"] != "timeout" || p["mode"] != "block_running" || !strings.Contains(p["foreground"].(string), "bash --norc") {
		t.Fatalf("wait_prompt under a nested shell = %v", p)
	}
	if st := b.get("status"); !strings.Contains(st["foreground"].(string), "bash --norc") {
		t.Fatalf("status = %v", st)
	}
	b.post("send", map[string]any{"data": "exit 5\n"})
	ended = waitBlockEnd(t, b, r["block_id"].(string))
	if ended["status"] != "failed" || num(ended["exit_code"]) != 5 {
		t.Fatalf("nested shell: %v", ended)
	}
	final := b.checkLifecycles()
	if len(final) != 6 {
		t.Fatalf("%d blocks, want 6", len(final))
	}
	if fb, ok := b.blocksFile(); ok {
		for id, blk := range final {
			if f := fb[id]; f.Status != blk.Status || (f.ExitCode == nil) != (blk.ExitCode == nil) || f.ExitCode != nil && *f.ExitCode != *blk.ExitCode {
				t.Fatalf("blocks.jsonl %+v, log %+v", f, blk)
			}
		}
	}
}

func waitBlockEnd(t *testing.T, b *bridge, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		blk := b.get("blocks/" + id)["block"].(map[string]any)
		if s := blk["status"]; s != "running" && s != "interactive" {
			return blk
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("block %s did not end", id)
	return nil
}

func waitForeground(t *testing.T, b *bridge, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if f, _ := b.get("status")["foreground"].(string); strings.Contains(f, name) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%q never in the foreground", name)
}

// TestRetriedRequests: one request id types once and runs once.
func TestRetriedRequests(t *testing.T) {
	b := newBridge(t)
	code, r1 := b.call("POST", "/api/pty/conv1/exec_block", "req-exec-1", map[string]any{"cmd": "echo RAN-ONCE"})
	if code != 200 {
		t.Fatalf("%d %v", code, r1)
	}
	code, r2 := b.call("POST", "/api/pty/conv1/exec_block", "req-exec-1", map[string]any{"cmd": "echo RAN-ONCE"})
	if code != 200 || fmt.Sprint(r1) != fmt.Sprint(r2) {
		t.Fatalf("retry = %d %v, first %v", code, r2, r1)
	}
	b.post("wait_prompt", map[string]any{"from_cursor": 0, "timeout_ms": 20000})
	code, r3 := b.call("POST", "/api/pty/conv1/exec_block", "req-exec-1", map[string]any{"cmd": "echo OTHER"})
	if code != 409 || r3["error"].(map[string]any)["code"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("reuse = %d %v", code, r3)
	}
	// send "7\r" twice with one id: the guess program reads one line.
	ir := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	b.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	for i := 0; i < 3; i++ {
		code, s := b.call("POST", "/api/pty/conv1/send", "req-send-1", map[string]any{"data": "7\r"})
		if code != 200 || s["ok"] != true {
			t.Fatalf("send %d = %d %v", i, code, s)
		}
	}
	b.post("wait_prompt", map[string]any{"from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	sp := string(b.spool())
	if n := strings.Count(sp, "RAN-ONCE\n"); n != 1 {
		t.Fatalf("RAN-ONCE printed %d times", n)
	}
	if n := strings.Count(sp, "Correct!"); n != 1 {
		t.Fatalf("Correct! printed %d times", n)
	}
	// The stray 7s would have run as a command: "7: command not found".
	if strings.Contains(sp, "command not found") {
		t.Fatalf("input typed twice: %q", sp)
	}
	var inputs, sends int
	b.barrier()
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == events.TypePtyInput {
			inputs++
			if ev.Req == "req-send-1" {
				sends++
			}
		}
	}
	if sends != 1 || inputs != 3 { // exec, exec_interactive, one send
		t.Fatalf("inputs %d, of them with req-send-1: %d", inputs, sends)
	}
	if final := b.checkLifecycles(); len(final) != 2 {
		t.Fatalf("%d blocks, want 2", len(final))
	}
}

// TestNoLeakedProcesses: end_session, reset and shutdown leave no process
// of the shell's session, and the shell itself is reaped.
func TestNoLeakedProcesses(t *testing.T) {
	b := newBridge(t)
	b.execWait("true")
	pid1 := int(num(b.get("status")["shell_pid"]))
	// Background and foreground children, one ignoring SIGINT.
	b.execWait("sleep 300 & sleep 301 & true")
	b.post("exec_block", map[string]any{"cmd": "trap '' INT; sleep 302"})
	waitForeground(t, b, "sleep 302")
	if n := countSession(pid1); n < 4 {
		t.Fatalf("session %d has %d processes, want ≥ 4", pid1, n)
	}
	e := b.post("end_session", map[string]any{"grace_ms": 300})
	if e["forced"] != true || e["mode"] != "idle" {
		t.Fatalf("end_session = %v", e)
	}
	r := b.post("reset", map[string]any{"reason": "test"})
	if r["ok"] != true || r["old_shell_id"] == r["shell_id"] {
		t.Fatalf("reset = %v", r)
	}
	assertGone(t, pid1)
	pid2 := int(num(b.get("status")["shell_pid"]))
	if pid2 == pid1 || pid2 == 0 {
		t.Fatalf("new shell pid %d", pid2)
	}
	b.execWait("sleep 303 & true")
	b.close()
	assertGone(t, pid2)
	final := b.checkLifecycles()
	if len(final) != 4 {
		t.Fatalf("%d blocks", len(final))
	}
}

// countSession counts the live processes of session sid from /proc.
func countSession(sid int) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 3 && f[3] == fmt.Sprint(sid) && f[0] != "Z" {
			n++
		}
	}
	return n
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for countSession(pid) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("session %d still has %d processes", pid, countSession(pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The shell is our child: reaped, so not even a zombie remains.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Fatalf("shell %d not reaped: %s", pid, raw)
	}
}

// TestCloseCrashedAfterCleanShutdown: a clean shutdown records every end,
// so CloseCrashed at the next start appends nothing.
func TestCloseCrashedAfterCleanShutdown(t *testing.T) {
	b := newBridge(t)
	b.post("exec_block", map[string]any{"cmd": "sleep 60"})
	b.close()
	final := b.checkLifecycles()
	for _, blk := range final {
		if blk.Status != events.BlockCancelled || blk.Reason != "shutdown" {
			t.Fatalf("block at shutdown: %+v", blk)
		}
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: b.home})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	last := eng.Log().LastSeq()
	ids, err := pty.CloseCrashed(context.Background(), eng)
	if err != nil || len(ids) != 0 || eng.Log().LastSeq() != last {
		t.Fatalf("CloseCrashed = %v, %v; log grew %d → %d", ids, err, last, eng.Log().LastSeq())
	}
}

// TestExecRightAfterShellExit: a block begun while the shell is dying
// still gets exactly one END, and the next exec gets a new shell.
func TestExecRightAfterShellExit(t *testing.T) {
	b := newBridge(t)
	for i := 0; i < 6; i++ {
		b.post("exec_block", map[string]any{"cmd": "exit 3"})
		deadline := time.Now().Add(20 * time.Second)
		var id string
		for id == "" {
			code, r := b.call("POST", "/api/pty/conv1/exec_block", "", map[string]any{"cmd": fmt.Sprintf("echo next-%d", i)})
			switch {
			case code == 200:
				id = r["block_id"].(string)
			case code == 409 && time.Now().Before(deadline):
			default:
				t.Fatalf("exec after exit: %d %v", code, r)
			}
		}
		blk := waitBlockEnd(t, b, id)
		if s := blk["status"]; s != "completed" && !(s == "failed" && blk["reason"] == "shell_exited") {
			t.Fatalf("block after exit: %v", blk)
		}
	}
	final := b.checkLifecycles()
	if len(final) != 12 {
		t.Fatalf("%d blocks, want 12", len(final))
	}
}

// TestRetriedResetAndEndSession: reset and end_session retried with one
// request id act once and answer the same; the id reused with another body
// is refused.
func TestRetriedResetAndEndSession(t *testing.T) {
	b := newBridge(t)
	b.execWait("true")
	code, r1 := b.call("POST", "/api/pty/conv1/reset", "req-reset-1", map[string]any{"reason": "test"})
	if code != 200 || r1["ok"] != true {
		t.Fatalf("reset = %d %v", code, r1)
	}
	code, r2 := b.call("POST", "/api/pty/conv1/reset", "req-reset-1", map[string]any{"reason": "test"})
	if code != 200 || fmt.Sprint(r1) != fmt.Sprint(r2) {
		t.Fatalf("retried reset = %d %v, first %v", code, r2, r1)
	}
	code, r3 := b.call("POST", "/api/pty/conv1/reset", "req-reset-1", map[string]any{"reason": "other"})
	if code != 409 || r3["error"].(map[string]any)["code"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("reused id = %d %v", code, r3)
	}
	ir := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	b.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	code, e1 := b.call("POST", "/api/pty/conv1/end_session", "req-end-1", map[string]any{})
	if code != 200 || e1["ok"] != true {
		t.Fatalf("end_session = %d %v", code, e1)
	}
	// A new interactive session: a retried end_session must not interrupt it.
	ir2 := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	b.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": ir2["resume_cursor"], "timeout_ms": 20000})
	code, e2 := b.call("POST", "/api/pty/conv1/end_session", "req-end-1", map[string]any{})
	if code != 200 || fmt.Sprint(e1) != fmt.Sprint(e2) {
		t.Fatalf("retried end_session = %d %v, first %v", code, e2, e1)
	}
	if st := b.get("status"); st["mode"] != "interactive" {
		t.Fatalf("retried end_session ended the new session: status %v", st)
	}
	b.post("send", map[string]any{"data": "7\r"})
	b.post("wait_prompt", map[string]any{"from_cursor": ir2["resume_cursor"], "timeout_ms": 20000})
	b.barrier()
	var resets, interrupts int
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case events.TypePtySessionReset:
			resets++
		case events.TypePtyInput:
			if in, err := events.DecodeAs[*events.PtyInput](ev); err == nil && in.Source == "interrupt" {
				interrupts++
			}
		}
	}
	if resets != 1 || interrupts != 1 {
		t.Fatalf("resets %d, interrupts %d; want 1 and 1", resets, interrupts)
	}
}

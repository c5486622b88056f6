package pty_test

import (
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// runGuess drives the guess program through an interactive session and
// returns the final block record.
func runGuess(t *testing.T, b *bridge, input, expect string) events.Block {
	t.Helper()
	r := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	for _, k := range []string{"ok", "session_id", "block_id", "ts_begin", "resume_cursor"} {
		if _, ok := r[k]; !ok {
			t.Fatalf("exec_interactive lacks %s: %v", k, r)
		}
	}
	if st := b.get("status"); st["mode"] != "interactive" || st["active_session_id"] != r["session_id"] || st["active_block_id"] != r["block_id"] {
		t.Fatalf("status during session = %v", st)
	}
	// resume_cursor is the spool size when the session began (seed §4.1):
	// the program may have printed since, but nothing of it lies before.
	if rc, size := num(r["resume_cursor"]), num(b.get("status")["resume_cursor"]); rc > size {
		t.Fatalf("exec_interactive resume_cursor %d is past the spool size %d", rc, size)
	}
	if rc := num(r["resume_cursor"]); rc == 0 {
		t.Fatalf("exec_interactive resume_cursor 0: the shell's first prompt should precede the session")
	} else if before := b.post("read_spool", map[string]any{"from_cursor": 0, "max_bytes": rc}); strings.Contains(before["data"].(string), "Guess a number") {
		t.Fatalf("output of the session lies before its resume_cursor %v: %q", r["resume_cursor"], before["data"])
	}
	w := b.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": r["resume_cursor"], "timeout_ms": 20000})
	if w["matched"] != true {
		t.Fatalf("wait_for Guess = %v", w)
	}
	// send answers {ok, resume_cursor}: the spool size before the input
	// (issue 25), so the wait below could start there too.
	if s := b.post("send", map[string]any{"data": input}); s["ok"] != true || len(s) != 2 || num(s["resume_cursor"]) < num(w["resume_cursor"]) {
		t.Fatalf("send = %v", s)
	}
	w = b.post("wait_for", map[string]any{"match": expect, "from_cursor": w["resume_cursor"], "timeout_ms": 20000})
	if w["matched"] != true {
		t.Fatalf("wait_for %q = %v", expect, w)
	}
	p := b.post("wait_prompt", map[string]any{"from_cursor": w["resume_cursor"], "timeout_ms": 20000})
	if p["matched"] != true || !strings.HasPrefix(p["match_text"].(string), "__FWS_PROMPT__ ") {
		t.Fatalf("wait_prompt = %v", p)
	}
	if st := b.get("status"); st["mode"] != "idle" {
		t.Fatalf("mode after prompt = %v", st)
	}
	final := b.checkLifecycles()
	blk := final[r["block_id"].(string)]
	if fb, ok := b.blocksFile(); ok {
		if got := fb[blk.BlockID]; got.Status != blk.Status || got.ExitCode == nil || *got.ExitCode != *blk.ExitCode {
			t.Fatalf("blocks.jsonl has %+v, log has %+v", got, blk)
		}
	}
	return blk
}

// TestInteractiveCorrectGuess is seed 001 §8.2.
func TestInteractiveCorrectGuess(t *testing.T) {
	b := newBridge(t)
	blk := runGuess(t, b, "7\r", "Correct!")
	if blk.Status != events.BlockCompleted || blk.ExitCode == nil || *blk.ExitCode != 0 || blk.Mode != "interactive" {
		t.Fatalf("block = %+v", blk)
	}
}

// TestInteractiveErrorPath is seed 001 §8.3.
func TestInteractiveErrorPath(t *testing.T) {
	b := newBridge(t)
	blk := runGuess(t, b, "11\r", "Out of range")
	if blk.Status != events.BlockCompleted || blk.ExitCode == nil || *blk.ExitCode != 2 {
		t.Fatalf("block = %+v", blk)
	}
	if !strings.Contains(string(b.spool()), "Out of range\n") {
		t.Fatal("spool lacks the error line")
	}
}

// TestSafetyGate is seed 001 §8.4 plus the busy rule of §3.6.
func TestSafetyGate(t *testing.T) {
	b := newBridge(t)
	r := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	code, out := b.call("POST", "/api/pty/conv1/exec_block", "", map[string]any{"cmd": "echo SHOULD_FAIL"})
	if code != 409 || out["ok"] != false || out["error"] != "interactive mode" || !strings.Contains(out["message"].(string), "interactive") {
		t.Fatalf("exec_block during session = %d %v", code, out)
	}
	code, out = b.call("POST", "/api/pty/conv1/exec_interactive", "", map[string]any{"cmd": "true"})
	if code != 409 || out["ok"] != false {
		t.Fatalf("exec_interactive during session = %d %v", code, out)
	}
	b.post("send", map[string]any{"data": "7\r"})
	b.post("wait_prompt", map[string]any{"from_cursor": r["resume_cursor"], "timeout_ms": 20000})
	if strings.Contains(string(b.spool()), "SHOULD_FAIL") {
		t.Fatal("the refused command ran")
	}
	// A running block refuses a new exec with {ok:false, error:"busy"}.
	b.post("exec_block", map[string]any{"cmd": "sleep 30"})
	code, out = b.call("POST", "/api/pty/conv1/exec_block", "", map[string]any{"cmd": "echo SHOULD_FAIL"})
	if code != 409 || out["ok"] != false || out["error"] != "busy" {
		t.Fatalf("exec_block while running = %d %v", code, out)
	}
	if e := b.post("end_session", map[string]any{"grace_ms": 5000}); e["ended"] != true || e["mode"] != "idle" {
		t.Fatalf("end_session = %v", e)
	}
	final := b.checkLifecycles()
	if len(final) != 2 {
		t.Fatalf("%d blocks, want 2", len(final))
	}
}

var sentinelRE = regexp.MustCompile(`^__FWS_PROMPT__ ts=(\d+) cwd_b64=([A-Za-z0-9+/=]*) exit=(-?\d+)$`)

// TestPromptSentinelConsistency is seed 001 §8.5: a parseable sentinel
// after every command, on a line of its own, even after output without a
// newline.
func TestPromptSentinelConsistency(t *testing.T) {
	b := newBridge(t)
	sub := t.TempDir()
	cmds := []struct {
		cmd  string
		exit int
		cwd  string
	}{
		{"true", 0, b.home.Dir},
		{"printf abc", 0, b.home.Dir},
		{"false", 1, b.home.Dir},
		{"cd " + sub, 0, sub},
		{"(exit 3)", 3, sub},
		{"echo done", 0, sub},
	}
	for _, c := range cmds {
		from := num(b.get("status")["resume_cursor"])
		b.post("exec_block", map[string]any{"cmd": c.cmd})
		p := b.post("wait_prompt", map[string]any{"from_cursor": from, "timeout_ms": 20000})
		line := strings.TrimSuffix(p["match_text"].(string), "\n")
		m := sentinelRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%q: sentinel %q does not parse", c.cmd, line)
		}
		ts, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || ts < 1_600_000_000_000 {
			t.Fatalf("%q: ts %q", c.cmd, m[1])
		}
		cwd, err := base64.StdEncoding.DecodeString(m[2])
		if err != nil || string(cwd) != c.cwd {
			t.Fatalf("%q: cwd %q (%v), want %q", c.cmd, cwd, err, c.cwd)
		}
		if m[3] != strconv.Itoa(c.exit) {
			t.Fatalf("%q: exit %s, want %d", c.cmd, m[3], c.exit)
		}
		extra := p["extra"].(map[string]any)
		if num(extra["exit"]) != int64(c.exit) || extra["cwd"] != c.cwd {
			t.Fatalf("%q: extra = %v", c.cmd, extra)
		}
	}
	sp := string(b.spool())
	if !strings.Contains(sp, "abc\n__FWS_PROMPT__ ") {
		t.Fatalf("sentinel not on a fresh line after printf abc: %q", sp)
	}
	for _, line := range strings.Split(sp, "\n") {
		if strings.Contains(line, "__FWS_PROMPT__") && !sentinelRE.MatchString(line) {
			t.Fatalf("sentinel not alone on its line: %q", line)
		}
	}
	if n := strings.Count(sp, "__FWS_PROMPT__"); n != len(cmds)+1 { // +1: the new shell's first prompt
		t.Fatalf("%d sentinels, want %d", n, len(cmds)+1)
	}
	final := b.checkLifecycles()
	if len(final) != len(cmds) {
		t.Fatalf("%d blocks", len(final))
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// agentLog is every byte of every tool answer an agent received.
type agentLog struct{ sb strings.Builder }

func (a *agentLog) call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res := toolRes(t, cs, name, args)
	b, _ := json.Marshal(res)
	a.sb.Write(b)
	if res.IsError {
		code, msg, _, _ := mcp.ErrorOf(res)
		t.Fatalf("%s %v: tool error %s: %s", name, args, code, msg)
	}
	var m map[string]any
	sc, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(sc, &m)
	return m
}

// TestMCPAgentIssue25 drives `cmlab mcp` as a process with the official
// SDK client exactly as issue 25 did, and checks what an agent that
// follows the tools' descriptions gets:
//   - §1: pty_status → pty_exec "sleep 2; echo finished" → pty_wait_for
//     {match_type prompt, from_cursor 0} returned in 25 ms on the shell's
//     first prompt while blocks_get said running; now it returns when the
//     block has completed. pty_exec_wait runs a command to its end.
//   - §3: the answers for a 1,000-line command hold no sentinel and no
//     wrapper, counted over every byte received.
//   - §4: cwd runs one command elsewhere; the next runs where it was.
//   - §5: unknown conversation NOT_FOUND at once; BUSY not doubled; Lab
//     tools; the feedback long poll.
func TestMCPAgentIssue25(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	cs, _, _ := mcpStdio(t, h)
	var a agentLog
	const conv = "agent1"

	if st := a.call(t, cs, "pty_status", map[string]any{"conversation_id": conv}); n(st["resume_cursor"]) != 0 {
		t.Fatalf("status = %v", st)
	}
	ex := a.call(t, cs, "pty_exec", map[string]any{"conversation_id": conv, "cmd": "sleep 2; echo finished"})
	if _, ok := ex["resume_cursor"]; !ok {
		t.Fatalf("pty_exec answered no resume_cursor: %v", ex)
	}
	start := time.Now()
	w := a.call(t, cs, "pty_wait_for", map[string]any{"conversation_id": conv, "match_type": "prompt", "from_cursor": 0, "timeout_ms": 30000})
	blk := a.call(t, cs, "blocks_get", map[string]any{"conversation_id": conv, "block_id": ex["block_id"]})["block"].(map[string]any)
	if w["matched"] != true || blk["status"] != "completed" || time.Since(start) < time.Second {
		t.Fatalf("prompt wait = %v after %s, block %v: a false done", w, time.Since(start), blk["status"])
	}

	// §3: a command whose terminal echo is on (its exec line is echoed).
	a.call(t, cs, "pty_exec_wait", map[string]any{"conversation_id": conv, "cmd": "stty echo"})
	var want strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	from := n(a.call(t, cs, "pty_status", map[string]any{"conversation_id": conv})["resume_cursor"])
	r := a.call(t, cs, "pty_exec_wait", map[string]any{"conversation_id": conv, "cmd": `for i in $(seq 1 1000); do echo "line $i"; done`, "max_bytes": 1 << 20})
	if r["done"] != true || n(r["exit_code"]) != 0 || r["status"] != "completed" || r["output"] != want.String() {
		t.Fatalf("pty_exec_wait = done %v exit %v status %v output %d bytes", r["done"], r["exit_code"], r["status"], len(fmt.Sprint(r["output"])))
	}
	for cur := from; ; {
		rd := a.call(t, cs, "pty_read_spool", map[string]any{"conversation_id": conv, "from_cursor": cur, "max_bytes": 4096})
		if n(rd["resume_cursor"]) == cur {
			break
		}
		cur = n(rd["resume_cursor"])
	}
	a.call(t, cs, "pty_wait_for", map[string]any{"conversation_id": conv, "match": "line 1000", "from_cursor": from, "timeout_ms": 5000})
	a.call(t, cs, "pty_wait_prompt", map[string]any{"conversation_id": conv, "from_cursor": from, "timeout_ms": 5000})
	a.call(t, cs, "blocks_read", map[string]any{"conversation_id": conv, "block_id": r["block_id"], "max_bytes": 1 << 20})
	got := a.sb.String()
	if s, e := strings.Count(got, "__FWS_PROMPT__"), strings.Count(got, "eval $'"); s != 0 || e != 0 {
		t.Fatalf("an agent received %d sentinels and %d wrappers", s, e)
	}
	raw := spoolBytes(t, cs, conv)
	if s, e := strings.Count(raw, "__FWS_PROMPT__"), strings.Count(raw, "eval $'"); s != 4 || e != 1 {
		t.Fatalf("the spool holds %d sentinels and %d echoed wrappers, want 4 and 1", s, e)
	}

	// §4
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	before := a.call(t, cs, "pty_exec_wait", map[string]any{"conversation_id": conv, "cmd": "pwd"})["output"]
	if out := a.call(t, cs, "pty_exec_wait", map[string]any{"conversation_id": conv, "cmd": "pwd", "cwd": dir})["output"]; out != dir+"\n" {
		t.Fatalf("pwd with cwd = %q", out)
	}
	if out := a.call(t, cs, "pty_exec_wait", map[string]any{"conversation_id": conv, "cmd": "pwd"})["output"]; out != before {
		t.Fatalf("pwd after = %q, before %q", out, before)
	}

	// §5: unknown conversation, at once.
	start = time.Now()
	res := toolRes(t, cs, "pty_wait_for", map[string]any{"conversation_id": "agent1-typo", "match_type": "prompt", "from_cursor": 0, "timeout_ms": 20000})
	if code, _, _, _ := mcp.ErrorOf(res); code != "NOT_FOUND" || time.Since(start) > 5*time.Second {
		t.Fatalf("wait on an unknown conversation = %q after %s", code, time.Since(start))
	}
	// BUSY says busy once.
	a.call(t, cs, "pty_exec", map[string]any{"conversation_id": conv, "cmd": "sleep 1"})
	res = toolRes(t, cs, "pty_exec", map[string]any{"conversation_id": conv, "cmd": "true"})
	if code, msg, _, _ := mcp.ErrorOf(res); code != "BUSY" || !strings.HasPrefix(msg, "busy: block ") || strings.Contains(msg, "busy: busy") {
		t.Fatalf("busy = %q %q", code, msg)
	}
	a.call(t, cs, "pty_wait_prompt", map[string]any{"conversation_id": conv, "from_cursor": 0, "timeout_ms": 20000})

	// Lab tools.
	if l := a.call(t, cs, "lab_runs_list", nil); l["items"] == nil {
		t.Fatalf("lab_runs_list = %v", l)
	}
	if l := a.call(t, cs, "lab_experiments_list", nil); l["items"] == nil {
		t.Fatalf("lab_experiments_list = %v", l)
	}
	if code, _, _, _ := mcp.ErrorOf(toolRes(t, cs, "lab_run_get", map[string]any{"run_id": "run_nope"})); code != "NOT_FOUND" {
		t.Fatalf("lab_run_get of an unknown run = %q", code)
	}
	p0 := a.call(t, cs, "lab_feedback_poll", map[string]any{"since": "0"})
	polled := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "lab_feedback_poll", Arguments: map[string]any{"since": p0["nextCursor"], "wait_seconds": 30}})
		if err != nil || res.IsError {
			polled <- nil
			return
		}
		b, _ := json.Marshal(res.StructuredContent)
		var m map[string]any
		json.Unmarshal(b, &m)
		polled <- m
	}()
	// Whether the poll is already waiting or not, it answers the entry.
	add := a.call(t, cs, "lab_feedback_add", map[string]any{"notes": "looks good", "ratings": map[string]any{"overall": 90}, "request_id": "fb-agent-1"})
	again := a.call(t, cs, "lab_feedback_add", map[string]any{"notes": "looks good", "ratings": map[string]any{"overall": 90}, "request_id": "fb-agent-1"})
	if add["feedbackId"] == nil || again["feedbackId"] != add["feedbackId"] {
		t.Fatalf("feedback add = %v, retry %v", add, again)
	}
	select {
	case m := <-polled:
		items, _ := m["items"].([]any)
		if len(items) != 1 || !strings.Contains(fmt.Sprint(items[0]), "looks good") {
			t.Fatalf("long poll = %v", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not answer the new entry")
	}
}

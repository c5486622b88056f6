package mcp

import (
	"net/http"
	"testing"
)

// TestAgentToolRequests (issue 25 §5): each new tool is one request to its
// route, with the request id where it acts.
func TestAgentToolRequests(t *testing.T) {
	fd := &fakeDaemon{}
	cs := connect(t, InProcess(fd, "tok"))
	cases := []struct {
		tool string
		args map[string]any
		want seen
	}{
		{"pty_exec_wait", map[string]any{"conversation_id": "c1", "cmd": "make", "cwd": "/src", "timeout_ms": 5000, "request_id": "r1"},
			seen{"POST", "/api/pty/c1/exec_wait", "", `{"cmd":"make","cwd":"/src","timeout_ms":5000}`, "tok", "r1"}},
		{"pty_interrupt", map[string]any{"conversation_id": "c1"},
			seen{"POST", "/api/pty/c1/interrupt", "", `{}`, "tok", ""}},
		{"pty_read_spool", map[string]any{"conversation_id": "c1", "from_cursor": 7, "raw": true},
			seen{"POST", "/api/pty/c1/read_spool", "", `{"from_cursor":7,"raw":true}`, "tok", ""}},
		{"lab_runs_list", map[string]any{}, seen{"GET", "/api/runs", "", "", "tok", ""}},
		{"lab_run_get", map[string]any{"run_id": "run_1"}, seen{"GET", "/api/runs/run_1", "", "", "tok", ""}},
		{"lab_experiments_list", map[string]any{}, seen{"GET", "/api/experiments", "", "", "tok", ""}},
		{"lab_feedback_add", map[string]any{"runId": "run_1", "ratings": map[string]any{"overall": 80}, "notes": "good", "request_id": "fb-1"},
			seen{"POST", "/api/feedback", "", `{"notes":"good","ratings":{"overall":80},"runId":"run_1"}`, "tok", "fb-1"}},
		{"lab_feedback_poll", map[string]any{"since": "10", "wait_seconds": 5},
			seen{"GET", "/api/feedback", "since=10&wait=5s", "", "tok", ""}},
	}
	for _, c := range cases {
		res := call(t, cs, c.tool, c.args)
		if res.IsError {
			t.Fatalf("%s: %v", c.tool, res.Content)
		}
		if got := fd.last(t); got != c.want {
			t.Errorf("%s sent %+v, want %+v", c.tool, got, c.want)
		}
	}
	// lab_feedback_add without a request id is refused before any request.
	n := fd.count()
	if code, _, _, isErr := ErrorOf(call(t, cs, "lab_feedback_add", map[string]any{"notes": "x"})); !isErr || code != "INVALID_ARGUMENT" || fd.count() != n {
		t.Fatalf("feedback without request_id: %v %q", isErr, code)
	}
}

// TestBusyNotDoubled (issue 25 §5): the terminal's refusal {ok:false,
// error:"busy", message:"busy: block … is running"} reads "busy: block …
// is running", not "busy: busy: …".
func TestBusyNotDoubled(t *testing.T) {
	fd := &fakeDaemon{replies: map[string]func(http.ResponseWriter, *http.Request){
		"POST /api/pty/c1/exec_block": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"ok":false,"error":"busy","message":"busy: block blk_1 is running"}`))
		},
	}}
	cs := connect(t, InProcess(fd, "tok"))
	res := call(t, cs, "pty_exec", map[string]any{"conversation_id": "c1", "cmd": "true"})
	code, msg, _, isErr := ErrorOf(res)
	if !isErr || code != "BUSY" || msg != "busy: block blk_1 is running" {
		t.Fatalf("busy = %v %q %q", isErr, code, msg)
	}
}

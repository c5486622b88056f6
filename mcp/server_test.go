package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// seen is one request the fake daemon received.
type seen struct {
	method, path, query, body, token, reqID string
}

// fakeDaemon records requests and answers each with a canned reply keyed
// by "METHOD path".
type fakeDaemon struct {
	mu      sync.Mutex
	reqs    []seen
	replies map[string]func(w http.ResponseWriter, r *http.Request)
}

func (f *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("X-CM-LAB-TOKEN"), r.Header.Get("X-CM-LAB-REQUEST-ID")})
	h := f.replies[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if h == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true,"echo":"` + r.Method + " " + r.URL.Path + `"}`))
		return
	}
	h(w, r)
}

func (f *fakeDaemon) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the daemon saw no request")
	}
	return f.reqs[len(f.reqs)-1]
}

func (f *fakeDaemon) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func connect(t *testing.T, d *Daemon) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv := NewServer(d, Options{Version: "test"})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

func structured(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestListTools(t *testing.T) {
	cs := connect(t, InProcess(&fakeDaemon{}, "tok"))
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if len(tool.Description) < 40 {
			t.Errorf("%s: description %q is too thin for an agent", tool.Name, tool.Description)
		}
		in, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(in, &schema); err != nil || schema.Type != "object" {
			t.Errorf("%s: input schema %s is not an object schema", tool.Name, in)
		}
		_, hasReq := schema.Properties["request_id"]
		mut := tool.Annotations != nil && !tool.Annotations.ReadOnlyHint
		if hasReq != mut {
			t.Errorf("%s: request_id present=%v, mutating=%v", tool.Name, hasReq, mut)
		}
		if strings.HasPrefix(tool.Name, "pty_") || strings.HasPrefix(tool.Name, "blocks_") {
			if !slices.Contains(schema.Required, "conversation_id") {
				t.Errorf("%s: conversation_id not required: %v", tool.Name, schema.Required)
			}
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
		if tool.Name == "pty_wait_for" {
			var mt struct {
				Enum []string `json:"enum"`
			}
			json.Unmarshal(schema.Properties["match_type"], &mt)
			if !slices.Equal(mt.Enum, []string{"substring", "regex", "prompt"}) || slices.Contains(schema.Required, "from_cursor") {
				t.Errorf("pty_wait_for: match_type enum %v, required %v", mt.Enum, schema.Required)
			}
		}
	}
	want := slices.Clone(ToolNames())
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	for _, n := range names {
		if strings.Contains(n, ".") {
			t.Errorf("tool name %q has a dot", n)
		}
	}
}

// TestToolRequests pins the HTTP request each tool makes: method, path,
// query, exact body, token and request id.
func TestToolRequests(t *testing.T) {
	cases := []struct {
		tool                      string
		args                      map[string]any
		method, path, query, body string
		reqID                     string
	}{
		{"pty_exec", map[string]any{"conversation_id": "c1", "cmd": "printf hi", "request_id": "r1"}, "POST", "/api/pty/c1/exec_block", "", `{"cmd":"printf hi"}`, "r1"},
		{"pty_exec", map[string]any{"conversation_id": "c1", "cmd": "ls", "cwd": "/tmp"}, "POST", "/api/pty/c1/exec_block", "", `{"cmd":"ls","cwd":"/tmp"}`, ""},
		{"pty_exec_interactive", map[string]any{"conversation_id": "c.2", "cmd": "./guess"}, "POST", "/api/pty/c.2/exec_interactive", "", `{"cmd":"./guess"}`, ""},
		{"pty_send", map[string]any{"conversation_id": "c1", "data": "7\r", "request_id": "s1"}, "POST", "/api/pty/c1/send", "", `{"data":"7\r"}`, "s1"},
		{"pty_wait_for", map[string]any{"conversation_id": "c1", "match": "hello", "from_cursor": 0}, "POST", "/api/pty/c1/wait_for", "", `{"from_cursor":0,"match":"hello","match_type":"substring"}`, ""},
		{"pty_wait_for", map[string]any{"conversation_id": "c1", "match": "w.rld", "match_type": "regex", "from_cursor": 12, "timeout_ms": 0}, "POST", "/api/pty/c1/wait_for", "", `{"from_cursor":12,"match":"w.rld","match_type":"regex","timeout_ms":0}`, ""},
		{"pty_wait_for", map[string]any{"conversation_id": "c1", "match_type": "prompt", "from_cursor": 5, "timeout_ms": 3000}, "POST", "/api/pty/c1/wait_for", "", `{"from_cursor":5,"match":"","match_type":"prompt","timeout_ms":3000}`, ""},
		// No from_cursor: none is sent, and the daemon waits from the end of the spool.
		{"pty_wait_for", map[string]any{"conversation_id": "c1", "match": "x"}, "POST", "/api/pty/c1/wait_for", "", `{"match":"x","match_type":"substring"}`, ""},
		{"pty_wait_prompt", map[string]any{"conversation_id": "c1"}, "POST", "/api/pty/c1/wait_prompt", "", `{}`, ""},
		{"pty_wait_prompt", map[string]any{"conversation_id": "c1", "from_cursor": 40, "timeout_ms": 100}, "POST", "/api/pty/c1/wait_prompt", "", `{"from_cursor":40,"timeout_ms":100}`, ""},
		{"pty_expect_send", map[string]any{"conversation_id": "c1", "expect": "Guess", "send": "7\r", "from_cursor": 3, "request_id": "e1"}, "POST", "/api/pty/c1/expect_send", "", `{"expect":"Guess","from_cursor":3,"send":"7\r"}`, "e1"},
		{"pty_read_spool", map[string]any{"conversation_id": "c1", "from_cursor": 0, "max_bytes": 10}, "POST", "/api/pty/c1/read_spool", "", `{"from_cursor":0,"max_bytes":10}`, ""},
		{"pty_status", map[string]any{"conversation_id": "c1"}, "GET", "/api/pty/c1/status", "", "", ""},
		{"pty_end_session", map[string]any{"conversation_id": "c1", "request_id": "x"}, "POST", "/api/pty/c1/end_session", "", `{}`, "x"},
		{"pty_reset", map[string]any{"conversation_id": "c1"}, "POST", "/api/pty/c1/reset", "", `{}`, ""},
		{"blocks_since", map[string]any{"conversation_id": "c1"}, "GET", "/api/pty/c1/blocks", "", "", ""},
		{"blocks_since", map[string]any{"conversation_id": "c1", "since": 3, "limit": 2}, "GET", "/api/pty/c1/blocks", "limit=2&since=3", "", ""},
		{"pty_end_session", map[string]any{"conversation_id": "c1", "grace_ms": 50}, "POST", "/api/pty/c1/end_session", "", `{"grace_ms":50}`, ""},
		{"pty_reset", map[string]any{"conversation_id": "c1", "reason": "wedged", "request_id": "z"}, "POST", "/api/pty/c1/reset", "", `{"reason":"wedged"}`, "z"},
		{"blocks_get", map[string]any{"conversation_id": "c1", "block_id": "blk_1"}, "GET", "/api/pty/c1/blocks/blk_1", "", "", ""},
		{"blocks_read", map[string]any{"conversation_id": "c1", "block_id": "blk_1", "offset": 5, "max_bytes": 7}, "GET", "/api/pty/c1/blocks/blk_1/output", "max_bytes=7&offset=5", "", ""},
		{"blocks_search", map[string]any{"conversation_id": "c1", "q": "a b&c"}, "GET", "/api/pty/c1/search", "q=a+b%26c", "", ""},
		{"blocks_search", map[string]any{"conversation_id": "c1", "q": "x", "block_id": "blk_2"}, "GET", "/api/pty/c1/search", "block_id=blk_2&q=x", "", ""},
		{"lab_feedback_poll", map[string]any{}, "GET", "/api/feedback", "since=0", "", ""},
		{"lab_feedback_poll", map[string]any{"since": "184", "sessionId": "lab_1", "limit": 2}, "GET", "/api/feedback", "limit=2&sessionId=lab_1&since=184", "", ""},
		{"lab_feedback_poll", map[string]any{"since": 184}, "GET", "/api/feedback", "since=184", "", ""},
		{"lab_session", map[string]any{}, "GET", "/api/session", "", "", ""},
	}
	fd := &fakeDaemon{}
	cs := connect(t, InProcess(fd, "tok"))
	for _, c := range cases {
		res := call(t, cs, c.tool, c.args)
		if res.IsError {
			t.Errorf("%s %v: tool error %v", c.tool, c.args, res.Content)
			continue
		}
		got := fd.last(t)
		want := seen{c.method, c.path, c.query, c.body, "tok", c.reqID}
		if got != want {
			t.Errorf("%s %v:\n got %+v\nwant %+v", c.tool, c.args, got, want)
		}
		wantOut := `{"echo":"` + c.method + " " + c.path + `","ok":true}`
		if s := structured(t, res); s != wantOut {
			t.Errorf("%s: structured %s, want %s", c.tool, s, wantOut)
		}
		if len(res.Content) != 1 {
			t.Fatalf("%s: %d content blocks", c.tool, len(res.Content))
		}
		if tc, ok := res.Content[0].(*sdk.TextContent); !ok || !strings.Contains(tc.Text, `"echo":"`+c.method+" "+c.path+`"`) {
			t.Errorf("%s: text content %#v", c.tool, res.Content[0])
		}
	}
}

// TestToolErrors: the daemon's envelope becomes a tool error with the same
// code and fix; bad arguments never reach the daemon; the server survives
// every one of them.
func TestToolErrors(t *testing.T) {
	fd := &fakeDaemon{replies: map[string]func(http.ResponseWriter, *http.Request){
		"POST /api/pty/c1/exec_block": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":{"code":"BUSY","message":"interactive mode: a session is open","context":{"fix":"Finish it with wait_prompt or end_session."}}}`))
		},
		"GET /api/feedback": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"code":"INVALID_CURSOR","message":"Cursor is not aligned to a newline boundary","context":{"fix":"Use the nextCursor returned by the previous poll (or start with since=0)","sizeBytes":10}}}`))
		},
		"GET /api/pty/c1/status": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("upstream exploded"))
		},
		"GET /api/session":       func(w http.ResponseWriter, r *http.Request) { panic("boom") },
		"GET /api/pty/c3/blocks": func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(` [1,2]`)) },
		"POST /api/pty/c2/exec_block": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"ok":false,"error":"interactive mode","message":"an interactive session is running"}`))
		},
	}}
	cs := connect(t, InProcess(fd, "tok"))

	res := call(t, cs, "pty_exec", map[string]any{"conversation_id": "c1", "cmd": "echo SHOULD_FAIL"})
	code, msg, fix, isErr := ErrorOf(res)
	if !isErr || code != "BUSY" || msg != "interactive mode: a session is open" || fix != "Finish it with wait_prompt or end_session." {
		t.Fatalf("busy: %v %q %q %q", isErr, code, msg, fix)
	}
	if txt := res.Content[0].(*sdk.TextContent).Text; txt != "BUSY: interactive mode: a session is open\nfix: Finish it with wait_prompt or end_session." {
		t.Errorf("busy text %q", txt)
	}

	// The terminal's seed-shaped refusal (409 {ok:false,error}) is BUSY too.
	res = call(t, cs, "pty_exec", map[string]any{"conversation_id": "c2", "cmd": "echo SHOULD_FAIL"})
	code, msg, fix, isErr = ErrorOf(res)
	if !isErr || code != "BUSY" || msg != "interactive mode: an interactive session is running" || !strings.Contains(fix, "pty_end_session") {
		t.Fatalf("refusal: %v %q %q %q", isErr, code, msg, fix)
	}

	res = call(t, cs, "lab_feedback_poll", map[string]any{"since": "1"})
	if code, _, fix, _ := ErrorOf(res); code != "INVALID_CURSOR" || !strings.Contains(fix, "nextCursor") {
		t.Fatalf("cursor: %q %q", code, fix)
	}
	if s := structured(t, res); !strings.Contains(s, `"sizeBytes":10`) {
		t.Errorf("context lost: %s", s)
	}

	res = call(t, cs, "pty_status", map[string]any{"conversation_id": "c1"})
	if code, msg, _, _ := ErrorOf(res); code != "INTERNAL" || msg != "HTTP 502: upstream exploded" {
		t.Fatalf("non-envelope: %q %q", code, msg)
	}

	res = call(t, cs, "lab_session", nil)
	if code, msg, _, _ := ErrorOf(res); code != "INTERNAL" || !strings.Contains(msg, "boom") {
		t.Fatalf("panic: %q %q", code, msg)
	}

	// A route answering something other than an object still gives an object.
	res = call(t, cs, "blocks_since", map[string]any{"conversation_id": "c3"})
	if s := structured(t, res); res.IsError || s != `{"result":[1,2]}` {
		t.Fatalf("array answer: %v %s", res.IsError, s)
	}

	before := fd.count()
	for _, bad := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"pty_exec", map[string]any{"cmd": "ls"}, ""},                                  // schema: conversation_id missing
		{"pty_exec", map[string]any{"conversation_id": "c1", "cmd": 5}, ""},            // schema: wrong type
		{"pty_exec", map[string]any{"conversation_id": "c1", "cmd": "ls", "x": 1}, ""}, // schema: unknown field
		{"pty_exec", map[string]any{"conversation_id": "../etc", "cmd": "ls"}, "INVALID_ARGUMENT"},
		{"pty_exec", map[string]any{"conversation_id": "c1", "cmd": "  "}, "INVALID_ARGUMENT"},
		{"pty_wait_for", map[string]any{"conversation_id": "c1", "match": "x", "match_type": "glob", "from_cursor": 0}, ""}, // schema: enum
		{"pty_wait_for", map[string]any{"conversation_id": "c1", "from_cursor": 0}, "INVALID_ARGUMENT"},
		{"blocks_get", map[string]any{"conversation_id": "c1", "block_id": ".."}, "INVALID_ARGUMENT"},
		{"blocks_search", map[string]any{"conversation_id": "c1", "q": ""}, "INVALID_ARGUMENT"},
	} {
		res := call(t, cs, bad.tool, bad.args)
		if !res.IsError {
			t.Errorf("%s %v: accepted", bad.tool, bad.args)
			continue
		}
		if bad.code != "" {
			if code, _, fix, _ := ErrorOf(res); code != bad.code || fix == "" {
				t.Errorf("%s %v: code %q fix %q", bad.tool, bad.args, code, fix)
			}
		}
	}
	if n := fd.count(); n != before {
		t.Errorf("bad arguments reached the daemon: %d requests", n-before)
	}
	// Still alive.
	if res := call(t, cs, "pty_status", map[string]any{"conversation_id": "c2"}); res.IsError {
		t.Fatalf("server dead after errors: %v", res.Content)
	}
}

// TestWaitForCancel: cancelling the MCP call cancels the daemon request.
func TestWaitForCancel(t *testing.T) {
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	fd := &fakeDaemon{replies: map[string]func(http.ResponseWriter, *http.Request){
		"POST /api/pty/c1/wait_for": func(w http.ResponseWriter, r *http.Request) {
			started <- struct{}{}
			select {
			case <-r.Context().Done():
				cancelled <- struct{}{}
			case <-time.After(time.Minute):
			}
			w.Write([]byte(`{"ok":false,"matched":false,"error":"timeout","resume_cursor":0}`))
		},
	}}
	cs := connect(t, InProcess(fd, "tok"))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "pty_wait_for", Arguments: map[string]any{"conversation_id": "c1", "match": "never", "from_cursor": 0, "timeout_ms": 60000}})
		errc <- err
	}()
	<-started
	t0 := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("call error %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon request was not cancelled")
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	if res := call(t, cs, "pty_status", map[string]any{"conversation_id": "c1"}); res.IsError {
		t.Fatalf("unusable after cancel: %v", res.Content)
	}
}

func TestRemoteBackend(t *testing.T) {
	fd := &fakeDaemon{}
	ts := httptest.NewServer(fd)
	defer ts.Close()
	cs := connect(t, Remote(strings.TrimPrefix(ts.URL, "http://"), "secret"))
	res := call(t, cs, "pty_send", map[string]any{"conversation_id": "c9", "data": "x", "request_id": " r-7"})
	if res.IsError {
		t.Fatal(res.Content)
	}
	if got := fd.last(t); got.token != "secret" || got.reqID != "r-7" || got.path != "/api/pty/c9/send" {
		t.Fatalf("remote request %+v", got)
	}
	ts.Close()
	res = call(t, cs, "pty_status", map[string]any{"conversation_id": "c9"})
	code, _, fix, isErr := ErrorOf(res)
	if !isErr || code != "INTERNAL" || !strings.Contains(fix, "cmlab serve") {
		t.Fatalf("unreachable: %v %q %q", isErr, code, fix)
	}
}

// TestStdioSurvivesGarbage: lines that are not JSON-RPC messages are
// answered with errors and the session goes on.
func TestStdioSurvivesGarbage(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := NewServer(InProcess(&fakeDaemon{}, "tok"), Options{})
	done := make(chan error, 1)
	go func() { done <- ServeStdio(context.Background(), srv, inR, outW); outW.Close() }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("no answer: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("answer %q: %v", lines.Text(), err)
		}
		return m
	}
	errCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	send("this is not json")
	if m := next(); errCode(m) != codeParseError || m["id"] != nil {
		t.Fatalf("garbage: %v", m)
	}
	send(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	if m := next(); errCode(m) != codeInvalidRequest {
		t.Fatalf("batch: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":7,"nomethod":true}`)
	if m := next(); errCode(m) != codeInvalidRequest || m["id"] != float64(7) {
		t.Fatalf("not a message: %v", m)
	}
	// A line over MaxLine is refused without buffering it all, then skipped.
	go func() {
		big := strings.Repeat("x", MaxLine+1000)
		io.WriteString(inW, `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"`+big+`"}}`+"\n")
	}()
	if m := next(); errCode(m) != codeInvalidRequest {
		t.Fatalf("huge line: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if m := next(); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{oops`)
	if m := next(); errCode(m) != codeParseError {
		t.Fatalf("garbage 2: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pty_status","arguments":{"conversation_id":"c1"}}}`)
	m := next()
	res, _ := m["result"].(map[string]any)
	if m["id"] != float64(2) || res == nil || res["isError"] == true {
		t.Fatalf("tools/call after garbage: %v", m)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not end at EOF")
	}
}

// TestResolvingBackend: after the daemon moved (restart on another port),
// a refused connection re-resolves and the call goes to the new one, once.
func TestResolvingBackend(t *testing.T) {
	a, b := &fakeDaemon{}, &fakeDaemon{}
	tsA, tsB := httptest.NewServer(a), httptest.NewServer(b)
	defer tsB.Close()
	var mu sync.Mutex
	cur, tok := tsA.URL, "tok-a"
	resolves := 0
	d, err := Resolving(func() (string, string, error) {
		mu.Lock()
		defer mu.Unlock()
		resolves++
		return cur, tok, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, d)
	if res := call(t, cs, "pty_send", map[string]any{"conversation_id": "c", "data": "1", "request_id": "r1"}); res.IsError {
		t.Fatal(res.Content)
	}
	tsA.Close()
	// Still at A: no change, so one refused attempt and a clear error.
	res := call(t, cs, "pty_send", map[string]any{"conversation_id": "c", "data": "2", "request_id": "r2"})
	if code, _, _, _ := ErrorOf(res); code != "INTERNAL" {
		t.Fatalf("daemon gone: %q", code)
	}
	mu.Lock()
	cur, tok = tsB.URL, "tok-b"
	mu.Unlock()
	res = call(t, cs, "pty_send", map[string]any{"conversation_id": "c", "data": "3", "request_id": "r3"})
	if res.IsError {
		t.Fatalf("after the move: %v", res.Content)
	}
	if got := b.last(t); got.token != "tok-b" || got.reqID != "r3" || got.body != `{"data":"3"}` || b.count() != 1 {
		t.Fatalf("new daemon saw %+v (%d requests)", got, b.count())
	}
	if a.count() != 1 {
		t.Fatalf("old daemon saw %d requests", a.count())
	}
}

// TestStdioScriptThenEOF: a client that writes its requests and closes
// stdin at once still gets every answer before the server ends.
func TestStdioScriptThenEOF(t *testing.T) {
	fd := &fakeDaemon{replies: map[string]func(http.ResponseWriter, *http.Request){
		"POST /api/pty/c1/wait_for": func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(300 * time.Millisecond)
			w.Write([]byte(`{"ok":true,"matched":true,"resume_cursor":9}`))
		},
	}}
	script := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"pty_wait_for","arguments":{"conversation_id":"c1","match":"x","from_cursor":0}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pty_status","arguments":{"conversation_id":"c1"}}}`,
	}, "\n") + "\n"
	var out strings.Builder
	srv := NewServer(InProcess(fd, "tok"), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ServeStdio(ctx, srv, strings.NewReader(script), &syncBuilder{b: &out}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Result == nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		ids[string(m.ID)] = true
	}
	if len(ids) != 3 || !ids[`1`] || !ids[`"w"`] || !ids[`3`] {
		t.Fatalf("answers for %v, want 1, \"w\", 3:\n%s", ids, out.String())
	}
}

type syncBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

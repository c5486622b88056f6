package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpChildEnv switches the test binary into `cmlab mcp` (the stdio server
// the tests spawn); mcpChildArgs carries its arguments, separated by \x1f.
const (
	mcpChildEnv  = "CMLAB_TEST_MCP_CHILD"
	mcpChildArgs = "CMLAB_TEST_MCP_ARGS"
)

// TestMCPChildProcess is not a test: it is the `cmlab mcp` process the
// stdio tests spawn by re-executing the test binary.
func TestMCPChildProcess(t *testing.T) {
	if os.Getenv(mcpChildEnv) != "1" {
		t.Skip("helper process for the MCP stdio tests")
	}
	g := &globalOpts{stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(run(g, strings.Split(os.Getenv(mcpChildArgs), "\x1f")))
}

var (
	mcpGuessOnce sync.Once
	mcpGuessPath string
	mcpGuessErr  error
)

// mcpGuess builds the guess program of seed 001 §8.2 from pty/testdata.
func mcpGuess(t *testing.T) string {
	t.Helper()
	mcpGuessOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cmlab-mcp-guess-")
		if err != nil {
			mcpGuessErr = err
			return
		}
		mcpGuessPath = filepath.Join(dir, "guess")
		out, err := exec.Command("go", "build", "-o", mcpGuessPath, "../../pty/testdata/guess").CombinedOutput()
		if err != nil {
			mcpGuessErr = fmt.Errorf("build guess: %v\n%s", err, out)
		}
	})
	if mcpGuessErr != nil {
		t.Fatal(mcpGuessErr)
	}
	return mcpGuessPath
}

// mcpStdio spawns `cmlab mcp --home h` and connects the SDK's client to it.
func mcpStdio(t testing.TB, h home.Home) (*sdk.ClientSession, *lockedBuffer, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPChildProcess$")
	tag := fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "_"), os.Getpid(), time.Now().UnixNano())
	cmd.Env = append(os.Environ(), mcpChildEnv+"=1", mcpChildArgs+"="+strings.Join([]string{"mcp", "--home", h.Dir}, "\x1f"),
		mcpTagEnv+"="+tag)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "cmlab-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to cmlab mcp: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("cmlab mcp did not exit cleanly: %v\nstderr: %s", err, stderr.String())
		}
		// Nothing it started (shells, their children) outlives it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := mcpTaggedProcs(tag)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("processes left behind by cmlab mcp: %v", left)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return cs, stderr, tag
}

// mcpRawChild is a spawned `cmlab mcp --home h` driven line by line over
// its pipes (no SDK client), for tests of what goes over the wire.
type mcpRawChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *lockedBuffer
	done   chan error
	exited bool
}

// mcpSpawnRaw starts `cmlab mcp --home h` with env added to its
// environment; it is killed at the end of the test unless wait saw it exit.
func mcpSpawnRaw(t *testing.T, h home.Home, env ...string) *mcpRawChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPChildProcess$")
	cmd.Env = append(append(os.Environ(), mcpChildEnv+"=1", mcpChildArgs+"="+strings.Join([]string{"mcp", "--home", h.Dir}, "\x1f")), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &mcpRawChild{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if !p.exited {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to d for the child to exit: false when it still runs,
// else true and its exit error.
func (p *mcpRawChild) wait(d time.Duration) (exited bool, err error) {
	select {
	case err := <-p.done:
		p.exited = true
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

// mcpTagEnv marks the environment of a spawned `cmlab mcp`; its shells
// inherit it, so /proc tells what it left behind.
const mcpTagEnv = "CMLAB_TEST_MCP_TAG"

// mcpTaggedProcs lists the live pids whose environment carries tag.
func mcpTaggedProcs(tag string) []int {
	ents, _ := os.ReadDir("/proc")
	want := []byte(mcpTagEnv + "=" + tag + "\x00")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // a zombie whose parent is gone is reaped by init
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// lockedBuffer is the child's stderr; only Write is exposed (an embedded
// bytes.Buffer would let io.Copy use its unlocked ReadFrom).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mcpDaemon is `cmlab serve` (daemon.Run: recovery, terminal
// manager, Lab UI, state/daemon.json) running in this process on
// 127.0.0.1.
type mcpDaemon struct {
	base  string
	token string
	info  labapi.DaemonInfo
	log   *requestLog
	stop  func() // idempotent; also run at cleanup
}

// requestLog counts the daemon's finished wait_for requests from its
// request log (in-process calls from /mcp included).
type requestLog struct {
	mu    sync.Mutex
	waits int
}

func (l *requestLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *requestLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *requestLog) WithGroup(string) slog.Handler            { return l }
func (l *requestLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "path" && strings.HasSuffix(a.Value.String(), "/wait_for") {
			l.mu.Lock()
			l.waits++
			l.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}

func (l *requestLog) finishedWaits() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waits
}

func mcpStartDaemon(t testing.TB, h home.Home) *mcpDaemon {
	t.Helper()
	return mcpStartDaemonOpts(t, h, false)
}

func mcpStartDaemonOpts(t testing.TB, h home.Home, readOnly bool) *mcpDaemon {
	t.Helper()
	ui := t.TempDir() // the Lab UI is served at / too, as `cmlab serve --ui`
	if err := os.WriteFile(filepath.Join(ui, "index.html"), []byte("<html></html>"), 0o600); err != nil {
		t.Fatal(err)
	}
	rl := &requestLog{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan labapi.DaemonInfo, 1)
	exited := make(chan error, 1)
	go func() {
		exited <- daemon.Run(ctx, daemon.Options{Home: h, Listen: "127.0.0.1:0", UIDir: ui, ReadOnly: readOnly,
			Logger: slog.New(rl), Ready: func(info labapi.DaemonInfo) { ready <- info }})
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-exited:
		cancel()
		t.Fatalf("cmlab serve: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("cmlab serve did not start")
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("cmlab serve: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("cmlab serve did not stop")
			}
		})
	}
	t.Cleanup(stop)
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	return &mcpDaemon{base: "http://" + info.Listen, token: tok, info: info, log: rl, stop: stop}
}

// tokenTransport adds the daemon's token to every request.
type tokenTransport struct{ token string }

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-CM-LAB-TOKEN", tt.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpHTTP connects the SDK's streamable HTTP client to d's /mcp.
func mcpHTTP(t testing.TB, d *mcpDaemon) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "cmlab-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: d.base + "/mcp",
		HTTPClient: &http.Client{Transport: tokenTransport{d.token}}}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// tool calls name and returns its structured answer; a tool error fails
// the test.
func tool(t testing.TB, cs *sdk.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res := toolRes(t, cs, name, args)
	if res.IsError {
		code, msg, fix, _ := mcp.ErrorOf(res)
		t.Fatalf("%s %v: tool error %s: %s (fix: %s)", name, args, code, msg, fix)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	// The same answer as text.
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	var fromText map[string]any
	if !ok || json.Unmarshal([]byte(tc.Text), &fromText) != nil || fmt.Sprint(fromText) != fmt.Sprint(m) {
		t.Fatalf("%s: text content %#v does not carry the structured answer %v", name, res.Content[0], m)
	}
	return m
}

func toolRes(t testing.TB, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

func n(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// spoolBytes reads the whole spool through pty_read_spool, raw (the
// spool's bytes; the clean view shows typed input too).
func spoolBytes(t *testing.T, cs *sdk.ClientSession, conv string) string {
	t.Helper()
	var sb strings.Builder
	cur := int64(0)
	for {
		r := tool(t, cs, "pty_read_spool", map[string]any{"conversation_id": conv, "from_cursor": cur, "max_bytes": 65536, "raw": true})
		sb.WriteString(r["data"].(string))
		next := n(r["resume_cursor"])
		if next == cur {
			return sb.String()
		}
		cur = next
	}
}

// lastBlocks is blocks.jsonl, last record per block.
func lastBlocks(t *testing.T, h home.Home, conv string) map[string]map[string]any {
	t.Helper()
	dir, err := h.PtyDir(conv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blocks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("blocks.jsonl line %q: %v", line, err)
		}
		out[m["block_id"].(string)] = m
	}
	return out
}

var mcpSentinelRE = regexp.MustCompile(`^__FWS_PROMPT__ ts=(\d+) cwd_b64=([A-Za-z0-9+/=]*) exit=(-?\d+)$`)

// mcpSeedFlow is seed 001 §8.1–§8.5 through the MCP tools.
func mcpSeedFlow(t *testing.T, cs *sdk.ClientSession, h home.Home, conv string) {
	guess := mcpGuess(t)
	c := map[string]any{"conversation_id": conv}
	with := func(kv ...any) map[string]any {
		m := map[string]any{"conversation_id": conv}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}

	// §8.1 cursor semantics.
	r := tool(t, cs, "pty_exec", with("cmd", `printf "hello\nworld\n"`))
	if r["ok"] != true || !strings.HasPrefix(r["block_id"].(string), "blk_") {
		t.Fatalf("pty_exec = %v", r)
	}
	w1 := tool(t, cs, "pty_wait_for", with("match", "hello", "from_cursor", 0, "timeout_ms", 20000))
	if _, ok := w1["next_cursor"]; ok {
		t.Fatalf("wait_for has next_cursor: %v", w1)
	}
	span, _ := w1["match_span"].(map[string]any)
	if w1["matched"] != true || w1["match_text"] != "hello" || span == nil || n(w1["resume_cursor"]) != n(span["end"]) {
		t.Fatalf("wait_for hello = %v", w1)
	}
	w2 := tool(t, cs, "pty_wait_for", with("match", "world", "from_cursor", w1["resume_cursor"], "timeout_ms", 20000))
	if w2["matched"] != true || n(w2["match_cursor"]) != n(w1["resume_cursor"])+1 {
		t.Fatalf("wait_for world = %v", w2)
	}
	tool(t, cs, "pty_wait_prompt", with("from_cursor", w2["resume_cursor"], "timeout_ms", 20000))
	w3 := tool(t, cs, "pty_wait_for", with("match", "hello", "from_cursor", w2["resume_cursor"], "timeout_ms", 300))
	st := tool(t, cs, "pty_status", c)
	if w3["ok"] != false || w3["matched"] != false || w3["error"] != "timeout" || n(w3["resume_cursor"]) != n(st["resume_cursor"]) {
		t.Fatalf("timeout = %v, status %v", w3, st)
	}
	if _, ok := w3["next_cursor"]; ok {
		t.Fatalf("timeout has next_cursor: %v", w3)
	}
	dir, _ := h.PtyDir(conv)
	if fi, err := os.Stat(filepath.Join(dir, "output.spool")); err != nil || fi.Size() != n(st["resume_cursor"]) {
		t.Fatalf("output.spool size %v (%v), resume_cursor %v", fi, err, st["resume_cursor"])
	}

	// §8.2 interactive, correct guess; §8.3 the error path.
	for _, tc := range []struct {
		input, expect string
		exit          int64
	}{{"7\r", "Correct!", 0}, {"11\r", "Out of range", 2}} {
		ir := tool(t, cs, "pty_exec_interactive", with("cmd", guess))
		for _, k := range []string{"ok", "session_id", "block_id", "ts_begin", "resume_cursor"} {
			if _, ok := ir[k]; !ok {
				t.Fatalf("exec_interactive lacks %s: %v", k, ir)
			}
		}
		if st := tool(t, cs, "pty_status", c); st["mode"] != "interactive" || n(st["resume_cursor"]) < n(ir["resume_cursor"]) {
			t.Fatalf("status in session = %v", st)
		}
		w := tool(t, cs, "pty_wait_for", with("match", "Guess a number", "from_cursor", ir["resume_cursor"], "timeout_ms", 20000))
		if w["matched"] != true {
			t.Fatalf("wait Guess = %v", w)
		}
		if s := tool(t, cs, "pty_send", with("data", tc.input)); s["ok"] != true {
			t.Fatalf("send = %v", s)
		}
		w = tool(t, cs, "pty_wait_for", with("match", tc.expect, "from_cursor", w["resume_cursor"], "timeout_ms", 20000))
		if w["matched"] != true {
			t.Fatalf("wait %q = %v", tc.expect, w)
		}
		p := tool(t, cs, "pty_wait_prompt", with("from_cursor", w["resume_cursor"], "timeout_ms", 20000))
		if p["matched"] != true {
			t.Fatalf("wait_prompt = %v", p)
		}
		if st := tool(t, cs, "pty_status", c); st["mode"] != "idle" {
			t.Fatalf("mode after prompt = %v", st)
		}
		id := ir["block_id"].(string)
		bg := tool(t, cs, "blocks_get", with("block_id", id))
		blk, _ := bg["block"].(map[string]any)
		if blk == nil || blk["status"] != "completed" || blk["exit_code"] == nil || n(blk["exit_code"]) != tc.exit {
			t.Fatalf("blocks_get %s = %v", id, bg)
		}
		if fb := lastBlocks(t, h, conv)[id]; fb == nil || fb["status"] != "completed" || n(fb["exit_code"]) != tc.exit {
			t.Fatalf("blocks.jsonl has %v for %s", fb, id)
		}
		out := tool(t, cs, "blocks_read", with("block_id", id, "offset", 0, "max_bytes", 4096))
		if !strings.Contains(out["data"].(string), tc.expect) {
			t.Fatalf("blocks_read %s = %v", id, out)
		}
	}

	// §8.4 safety gate; the session is then finished with expect_send.
	ir := tool(t, cs, "pty_exec_interactive", with("cmd", guess))
	res := toolRes(t, cs, "pty_exec", with("cmd", "echo SHOULD_FAIL"))
	code, msg, fix, isErr := mcp.ErrorOf(res)
	if !isErr || code != "BUSY" || !strings.Contains(msg, "interactive mode") || fix == "" {
		t.Fatalf("pty_exec in a session: %v %q %q %q", isErr, code, msg, fix)
	}
	es := tool(t, cs, "pty_expect_send", with("expect", "Guess a number", "send", "7\r", "from_cursor", ir["resume_cursor"], "timeout_ms", 20000))
	if es["matched"] != true {
		t.Fatalf("expect_send = %v", es)
	}
	tool(t, cs, "pty_wait_for", with("match", "Correct!", "from_cursor", es["resume_cursor"], "timeout_ms", 20000))
	tool(t, cs, "pty_wait_prompt", with("from_cursor", es["resume_cursor"], "timeout_ms", 20000))
	if strings.Contains(spoolBytes(t, cs, conv), "SHOULD_FAIL") {
		t.Fatal("the refused command ran")
	}

	// §8.5 a sentinel after every command, parseable.
	before := strings.Count(spoolBytes(t, cs, conv), "__FWS_PROMPT__")
	cmds := []string{"true", "false", "cd /", "printf abc"}
	for _, cmd := range cmds {
		cur := tool(t, cs, "pty_status", c)["resume_cursor"]
		tool(t, cs, "pty_exec", with("cmd", cmd))
		if p := tool(t, cs, "pty_wait_prompt", with("from_cursor", cur, "timeout_ms", 20000)); p["matched"] != true {
			t.Fatalf("%s: wait_prompt = %v", cmd, p)
		}
	}
	sp := spoolBytes(t, cs, conv)
	if got := strings.Count(sp, "__FWS_PROMPT__"); got != before+len(cmds) {
		t.Fatalf("%d sentinels after %d commands, want %d", got, len(cmds), before+len(cmds))
	}
	for _, line := range strings.Split(sp, "\n") {
		if !strings.Contains(line, "__FWS_PROMPT__") {
			continue
		}
		m := mcpSentinelRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("sentinel %q does not parse", line)
		}
		if _, err := strconv.ParseInt(m[1], 10, 64); err != nil {
			t.Fatalf("sentinel ts %q: %v", m[1], err)
		}
		if _, err := base64.StdEncoding.DecodeString(m[2]); err != nil {
			t.Fatalf("sentinel cwd %q: %v", m[2], err)
		}
	}

	// Blocks: listed, searchable.
	bs := tool(t, cs, "blocks_since", c)
	if blocks, _ := bs["blocks"].([]any); len(blocks) != 4+len(cmds) {
		t.Fatalf("blocks_since: %d blocks, want %d", len(blocks), 4+len(cmds))
	}
	if s := tool(t, cs, "blocks_search", with("q", "Out of range")); len(s["matches"].([]any)) == 0 {
		t.Fatalf("blocks_search = %v", s)
	}
}

// mcpCancelledWait: a cancelled pty_wait_for returns promptly, its request
// to the daemon ends (checked when d is known) and the terminal stays
// usable.
func mcpCancelledWait(t *testing.T, cs *sdk.ClientSession, conv string, d *mcpDaemon) {
	// A conversation with a terminal: a wait on one that has none is
	// NOT_FOUND at once (issue 25).
	tool(t, cs, "pty_exec_wait", map[string]any{"conversation_id": conv, "cmd": "true"})
	cur := tool(t, cs, "pty_status", map[string]any{"conversation_id": conv})["resume_cursor"]
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "pty_wait_for", Arguments: map[string]any{
			"conversation_id": conv, "match": "NEVER-PRINTED", "from_cursor": cur, "timeout_ms": 120000}})
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond) // let the wait reach the daemon
	var waitsBefore int
	if d != nil {
		waitsBefore = d.log.finishedWaits()
	}
	t0 := time.Now()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait_for returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled wait_for did not return")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	if d != nil {
		// The daemon's wait_for request ended too (it would run 120 s otherwise).
		deadline := time.Now().Add(10 * time.Second)
		for d.log.finishedWaits() == waitsBefore {
			if time.Now().After(deadline) {
				t.Fatal("the daemon's wait_for kept running after the client cancelled")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if st := tool(t, cs, "pty_status", map[string]any{"conversation_id": conv}); st["mode"] != "idle" {
		t.Fatalf("status after cancel = %v", st)
	}
	tool(t, cs, "pty_exec", map[string]any{"conversation_id": conv, "cmd": "echo after-cancel"})
	if w := tool(t, cs, "pty_wait_for", map[string]any{"conversation_id": conv, "match": "after-cancel", "from_cursor": cur, "timeout_ms": 20000}); w["matched"] != true {
		t.Fatalf("wait after cancel = %v", w)
	}
}

func mcpListTools(t *testing.T, cs *sdk.ClientSession) {
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("%s: no description or input schema", tl.Name)
		}
	}
	want := slices.Clone(mcp.ToolNames())
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
}

// TestMCPStdioInProcess: `cmlab mcp` with no daemon opens the home itself.
func TestMCPStdioInProcess(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	cs, stderr, tag := mcpStdio(t, h)
	mcpListTools(t, cs)
	mcpSeedFlow(t, cs, h, "conv1")
	// The shell runs under cmlab mcp (and is gone after it: see mcpStdio).
	if procs := mcpTaggedProcs(tag); len(procs) < 2 {
		t.Fatalf("processes of cmlab mcp and its shell: %v", procs)
	}
	mcpCancelledWait(t, cs, "conv1", nil)
	if s := tool(t, cs, "lab_session", nil); !strings.HasPrefix(s["sessionId"].(string), "lab_") {
		t.Fatalf("lab_session = %v", s)
	}
	if !strings.Contains(stderr.String(), "no daemon runs") {
		t.Errorf("stderr does not say the home was opened in-process: %q", stderr.String())
	}
}

// TestMCPStdioThroughDaemon: with a daemon running, `cmlab mcp` is its
// client; feedback submitted over HTTP pages through lab_feedback_poll with
// no duplicate and no gap.
func TestMCPStdioThroughDaemon(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	d := mcpStartDaemon(t, h)
	cs, stderr, _ := mcpStdio(t, h)
	if !strings.Contains(stderr.String(), "using the daemon at "+d.base) {
		t.Errorf("stderr = %q", stderr.String())
	}
	mcpListTools(t, cs)

	// Retried send with one request_id types once.
	conv := "conv-retry"
	tool(t, cs, "pty_exec", map[string]any{"conversation_id": conv, "cmd": "cat", "request_id": "exec-cat-1"})
	tool(t, cs, "pty_exec", map[string]any{"conversation_id": conv, "cmd": "cat", "request_id": "exec-cat-1"})
	tool(t, cs, "pty_send", map[string]any{"conversation_id": conv, "data": "once\r", "request_id": "send-1"})
	tool(t, cs, "pty_send", map[string]any{"conversation_id": conv, "data": "once\r", "request_id": "send-1"})
	tool(t, cs, "pty_wait_for", map[string]any{"conversation_id": conv, "match": "once", "from_cursor": 0, "timeout_ms": 20000})
	tool(t, cs, "pty_send", map[string]any{"conversation_id": conv, "data": "\x04"})
	tool(t, cs, "pty_wait_prompt", map[string]any{"conversation_id": conv, "from_cursor": 0, "timeout_ms": 20000})
	if got := strings.Count(spoolBytes(t, cs, conv), "once"); got != 1 {
		t.Fatalf("retried send typed %d times", got)
	}
	if bs := tool(t, cs, "blocks_since", map[string]any{"conversation_id": conv}); len(bs["blocks"].([]any)) != 1 {
		t.Fatalf("retried exec made blocks %v", bs["blocks"])
	}
	res := toolRes(t, cs, "pty_send", map[string]any{"conversation_id": conv, "data": "different\r", "request_id": "send-1"})
	if code, _, _, _ := mcp.ErrorOf(res); code != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("reused request_id: %q", code)
	}

	mcpCancelledWait(t, cs, "conv-cancel", d)
	mcpFeedbackPaging(t, cs, d)

	// The daemon restarts on another port: the running `cmlab mcp` finds it
	// again through state/daemon.json.
	d.stop()
	d2 := mcpStartDaemon(t, h)
	if d2.base == d.base {
		t.Fatalf("the new daemon reuses %s", d.base)
	}
	if s := tool(t, cs, "lab_session", nil); s["sessionId"] != d2.info.SessionID || d2.info.SessionID == d.info.SessionID {
		t.Fatalf("after the restart lab_session = %v (daemon %s)", s, d2.base)
	}
	if st := tool(t, cs, "pty_status", map[string]any{"conversation_id": conv}); n(st["blocks"]) != 1 {
		t.Fatalf("after the restart status = %v", st)
	}
}

// mcpPostFeedbackE is mcpPostFeedback for a goroutine: "" on failure,
// which the comparison then reports.
func mcpPostFeedbackE(d *mcpDaemon, i int) string {
	body := fmt.Sprintf(`{"ratings":{"overall":%d},"notes":"entry %d"}`, i%101, i)
	req, _ := http.NewRequest("POST", d.base+"/api/feedback", strings.NewReader(body))
	req.Header.Set("X-CM-LAB-TOKEN", d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		FeedbackID string `json:"feedbackId"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || resp.StatusCode != 200 {
		return ""
	}
	return out.FeedbackID
}

// mcpPostFeedback submits one feedback entry over HTTP and returns its id.
func mcpPostFeedback(t *testing.T, d *mcpDaemon, i int) string {
	t.Helper()
	body := fmt.Sprintf(`{"ratings":{"overall":%d},"notes":"entry %d"}`, i%101, i)
	req, _ := http.NewRequest("POST", d.base+"/api/feedback", strings.NewReader(body))
	req.Header.Set("X-CM-LAB-TOKEN", d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		FeedbackID string `json:"feedbackId"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out.FeedbackID == "" {
		t.Fatalf("POST /api/feedback: %d %v %+v", resp.StatusCode, err, out)
	}
	return out.FeedbackID
}

func mcpFeedbackPaging(t *testing.T, cs *sdk.ClientSession, d *mcpDaemon) {
	var posted []string
	for i := range 7 {
		posted = append(posted, mcpPostFeedback(t, d, i))
	}
	session := tool(t, cs, "lab_session", nil)["sessionId"].(string)
	var got []string
	cursor := "0"
	poll := func() int {
		r := tool(t, cs, "lab_feedback_poll", map[string]any{"since": cursor, "sessionId": session, "limit": 3})
		items := r["items"].([]any)
		if len(items) > 3 {
			t.Fatalf("limit 3 returned %d items", len(items))
		}
		for _, it := range items {
			got = append(got, it.(map[string]any)["id"].(string))
		}
		next, ok := r["nextCursor"].(string)
		if !ok {
			t.Fatalf("nextCursor %v is not a string", r["nextCursor"])
		}
		if nc, _ := strconv.ParseInt(next, 10, 64); nc < func() int64 { c, _ := strconv.ParseInt(cursor, 10, 64); return c }() {
			t.Fatalf("cursor went back: %s → %s", cursor, next)
		}
		cursor = next
		return len(items)
	}
	for poll() > 0 {
	}
	// More feedback arrives between polls.
	for i := 7; i < 12; i++ {
		posted = append(posted, mcpPostFeedback(t, d, i))
		if i == 9 {
			poll()
		}
	}
	for poll() > 0 {
	}
	if !slices.Equal(got, posted) {
		t.Fatalf("polled %v\n  want %v", got, posted)
	}
	// Feedback posted while the agent polls: every entry once, in order.
	postedc := make(chan []string, 1)
	go func() {
		var ids []string
		defer func() { postedc <- ids }()
		for i := 100; i < 130; i++ {
			ids = append(ids, mcpPostFeedbackE(d, i))
		}
	}()
	before := len(got)
	var more []string
	deadline := time.Now().Add(60 * time.Second)
	for len(got)-before < 30 && time.Now().Before(deadline) {
		if poll() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	more = <-postedc
	for poll() > 0 {
	}
	if !slices.Equal(got[before:], more) {
		t.Fatalf("polled during posting %v\n  want %v", got[before:], more)
	}
	// A cursor that is not on a line boundary is a tool error with the API's code and fix.
	res := toolRes(t, cs, "lab_feedback_poll", map[string]any{"since": "1"})
	if code, _, fix, _ := mcp.ErrorOf(res); code != "INVALID_CURSOR" || fix == "" {
		t.Fatalf("since=1: %q %q", code, fix)
	}
}

// TestMCPStreamableHTTP: the same tools at /mcp on the daemon; 401 without
// the token.
func TestMCPStreamableHTTP(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	d := mcpStartDaemon(t, h)

	for _, hdr := range []map[string]string{{}, {"X-CM-LAB-TOKEN": "wrong"}} {
		req, _ := http.NewRequest("POST", d.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || env.Error.Code != "UNAUTHORIZED" {
			t.Fatalf("/mcp with %v: %d %q", hdr, resp.StatusCode, env.Error.Code)
		}
	}
	// Authorization: Bearer is accepted like X-CM-LAB-TOKEN.
	req, _ := http.NewRequest("POST", d.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+d.token)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize with a bearer token: %d", resp.StatusCode)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: d.base + "/mcp"}, nil); err == nil {
		cs.Close()
		t.Fatal("connected to /mcp without the token")
	}

	cs := mcpHTTP(t, d)
	mcpListTools(t, cs)
	// A malformed POST is refused and kills nothing.
	req, _ = http.NewRequest("POST", d.base+"/mcp", strings.NewReader(`{"jsonrpc":`))
	req.Header.Set("X-CM-LAB-TOKEN", d.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode < 400 || resp.StatusCode > 499 {
		t.Fatalf("malformed POST /mcp: %d", resp.StatusCode)
	}
	mcpSeedFlow(t, cs, h, "conv-http")
	mcpCancelledWait(t, cs, "conv-http", d)
	mcpFeedbackPaging(t, cs, d)
}

// TestMCPStdioProtocolErrors: lines that are not JSON-RPC messages get
// JSON-RPC errors from the spawned `cmlab mcp` and the session goes on.
func TestMCPStdioProtocolErrors(t *testing.T) {
	p := mcpSpawnRaw(t, home.Home{Dir: privateDir(t)})
	dec := json.NewDecoder(p.stdout)
	next := func() map[string]any {
		t.Helper()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("reading cmlab mcp: %v\nstderr: %s", err, p.stderr.String())
		}
		return m
	}
	send := func(line string) {
		t.Helper()
		if _, err := p.stdin.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	errCode := func(m map[string]any) int64 {
		e, _ := m["error"].(map[string]any)
		return n(e["code"])
	}
	send(`hello?`)
	if m := next(); errCode(m) != -32700 {
		t.Fatalf("garbage: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if m := next(); n(m["id"]) != 1 || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pty_status"`) // cut short
	if m := next(); errCode(m) != -32700 {
		t.Fatalf("truncated: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
	if m := next(); n(m["id"]) != 3 || (m["error"] == nil && m["result"].(map[string]any)["isError"] != true) {
		t.Fatalf("unknown tool: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"pty_status","arguments":{"conversation_id":7}}}`)
	if m := next(); n(m["id"]) != 4 || m["result"].(map[string]any)["isError"] != true {
		t.Fatalf("bad arguments: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"lab_session","arguments":{}}}`)
	m := next()
	res, _ := m["result"].(map[string]any)
	if n(m["id"]) != 5 || res == nil || res["isError"] == true {
		t.Fatalf("lab_session after errors: %v", m)
	}
	p.stdin.Close()
	exited, err := p.wait(30 * time.Second)
	if !exited {
		t.Fatal("cmlab mcp did not exit when stdin closed")
	}
	if err != nil {
		t.Fatalf("cmlab mcp exit: %v\nstderr: %s", err, p.stderr.String())
	}
}

// BenchmarkMCPToolCall is the round trip of one read tool (lab_session)
// and one terminal read (pty_status) through `cmlab mcp` on stdio to a
// daemon, and through /mcp on the daemon.
func BenchmarkMCPToolCall(b *testing.B) {
	h := home.Home{Dir: b.TempDir()}
	d := mcpStartDaemon(b, h)
	stdio, _, _ := mcpStdio(b, h)
	httpCS := mcpHTTP(b, d)
	tool(b, stdio, "pty_status", map[string]any{"conversation_id": "bench"}) // start the shell
	for _, c := range []struct {
		name string
		cs   *sdk.ClientSession
	}{{"stdio", stdio}, {"http", httpCS}} {
		for _, tl := range []struct {
			name string
			args map[string]any
		}{{"lab_session", nil}, {"pty_status", map[string]any{"conversation_id": "bench"}}} {
			b.Run(c.name+"/"+tl.name, func(b *testing.B) {
				for b.Loop() {
					tool(b, c.cs, tl.name, tl.args)
				}
			})
		}
	}
}

// TestMCPReadOnlyDaemon: a read-only daemon (a replayed home) still serves
// the read tools at /mcp; writes are refused with the API's error.
func TestMCPReadOnlyDaemon(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	d := mcpStartDaemon(t, h)
	var posted []string
	for i := range 3 {
		posted = append(posted, mcpPostFeedback(t, d, i))
	}
	d.stop()

	ro := mcpStartDaemonOpts(t, h, true)
	cs := mcpHTTP(t, ro)
	r := tool(t, cs, "lab_feedback_poll", map[string]any{"since": "0"})
	var got []string
	for _, it := range r["items"].([]any) {
		got = append(got, it.(map[string]any)["id"].(string))
	}
	if !slices.Equal(got, posted) {
		t.Fatalf("read-only poll %v, want %v", got, posted)
	}
	res := toolRes(t, cs, "pty_exec", map[string]any{"conversation_id": "c", "cmd": "echo no"})
	if code, msg, fix, isErr := mcp.ErrorOf(res); !isErr || code != "FORBIDDEN" || !strings.Contains(msg, "read-only") || fix == "" {
		t.Fatalf("pty_exec on a read-only daemon: %v %q %q %q", isErr, code, msg, fix)
	}
}

// TestMCPStdioSIGTERM: SIGTERM ends an in-process `cmlab mcp` cleanly
// (exit 0, terminals and what runs in them gone, the home unlocked) while
// its stdin stays open.
func TestMCPStdioSIGTERM(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	tag := fmt.Sprintf("sigterm-%d-%d", os.Getpid(), time.Now().UnixNano())
	p := mcpSpawnRaw(t, h, mcpTagEnv+"="+tag)
	defer p.stdin.Close()
	dec := json.NewDecoder(p.stdout)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pty_exec","arguments":{"conversation_id":"c1","cmd":"sleep 600"}}}`,
	} {
		if _, err := p.stdin.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for want := int64(1); want <= 2; want++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil || n(m["id"]) != want || m["result"] == nil {
			t.Fatalf("answer %d: %v %v\nstderr: %s", want, m, err, p.stderr.String())
		}
	}
	for start := time.Now(); len(mcpTaggedProcs(tag)) < 3; { // cmlab mcp, bash, sleep
		if time.Since(start) > 20*time.Second {
			t.Fatalf("cmlab mcp, its shell and the command: %v", mcpTaggedProcs(tag))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited, err := p.wait(30 * time.Second)
	if !exited {
		t.Fatal("cmlab mcp ignored SIGTERM")
	}
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v\nstderr: %s", err, p.stderr.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(mcpTaggedProcs(tag)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %v", mcpTaggedProcs(tag))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The home is free again: the engine closed and released its lock.
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatalf("home still locked after SIGTERM: %v", err)
	}
	eng.Close()
}

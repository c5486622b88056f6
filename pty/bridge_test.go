package pty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
)

const testToken = "test-token-0123456789"

// guessBin is the guess program of seed 001 §8.2, built once per test binary.
var (
	guessOnce sync.Once
	guessPath string
	guessErr  error
)

func guess(t *testing.T) string {
	t.Helper()
	guessOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cmlab-guess-")
		if err != nil {
			guessErr = err
			return
		}
		guessPath = filepath.Join(dir, "guess")
		cmd := exec.Command("go", "build", "-o", guessPath, "./testdata/guess")
		out, err := cmd.CombinedOutput()
		if err != nil {
			guessErr = fmt.Errorf("build guess: %v\n%s", err, out)
		}
	})
	if guessErr != nil {
		t.Fatal(guessErr)
	}
	return guessPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guessPath != "" {
		os.RemoveAll(filepath.Dir(guessPath))
	}
	os.Exit(code)
}

// bridge is a real engine in a temporary home, a manager and the HTTP API
// on 127.0.0.1.
type bridge struct {
	t    *testing.T
	home home.Home
	eng  *engine.Engine
	mgr  *pty.Manager
	srv  *httptest.Server
	base string
	conv string
	// clean: read the clean view (the default of the API) instead of the raw one.
	clean bool
}

func newBridge(t *testing.T) *bridge {
	t.Helper()
	return openBridge(t, home.Home{Dir: t.TempDir()})
}

func openBridge(t *testing.T, h home.Home) *bridge {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	return openBridgeOn(t, h, eng)
}

func openBridgeOn(t *testing.T, h home.Home, eng *engine.Engine) *bridge {
	t.Helper()
	return openBridgeWith(t, h, eng, pty.Options{Dir: h.Dir})
}

func openBridgeWith(t *testing.T, h home.Home, eng *engine.Engine, opts pty.Options) *bridge {
	t.Helper()
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

func (b *bridge) close() {
	if b.srv == nil {
		return
	}
	b.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.mgr.Close(ctx); err != nil {
		b.t.Errorf("manager close: %v", err)
	}
	if err := b.eng.Close(); err != nil {
		b.t.Errorf("engine close: %v", err)
	}
	b.srv = nil
}

// call sends one request and decodes the JSON answer.
func (b *bridge) call(method, path, reqID string, body any) (int, map[string]any) {
	b.t.Helper()
	var rd io.Reader
	if m, ok := body.(map[string]any); ok && method == "POST" && !b.clean && rawViewOps[path[strings.LastIndexByte(path, '/')+1:]] {
		// These tests check the spool's bytes (seed 001): they read the
		// raw view. The clean view has tests of its own (clean_test.go).
		if _, set := m["raw"]; !set {
			m["raw"] = true
		}
	}
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, b.base+path, rd)
	req.Header.Set("X-CM-LAB-TOKEN", testToken)
	if reqID != "" {
		req.Header.Set("X-CM-LAB-REQUEST-ID", reqID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		b.t.Fatalf("%s %s: not JSON (%d): %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// rawViewOps are the routes with a clean and a raw view.
var rawViewOps = map[string]bool{"read_spool": true, "wait_for": true, "wait_prompt": true, "expect_send": true}

func (b *bridge) post(op string, body any) map[string]any {
	b.t.Helper()
	code, out := b.call("POST", "/api/pty/"+b.conv+"/"+op, "", body)
	if code != 200 {
		b.t.Fatalf("%s: HTTP %d: %v", op, code, out)
	}
	return out
}

func (b *bridge) get(path string) map[string]any {
	b.t.Helper()
	code, out := b.call("GET", "/api/pty/"+b.conv+"/"+path, "", nil)
	if code != 200 {
		b.t.Fatalf("GET %s: HTTP %d: %v", path, code, out)
	}
	return out
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// exec runs cmd as a block and waits for its prompt; it returns the block
// record.
func (b *bridge) execWait(cmd string) map[string]any {
	b.t.Helper()
	st := b.get("status")
	from := num(st["resume_cursor"])
	r := b.post("exec_block", map[string]any{"cmd": cmd})
	id := r["block_id"].(string)
	w := b.post("wait_prompt", map[string]any{"from_cursor": from, "timeout_ms": 20000})
	if w["matched"] != true {
		b.t.Fatalf("exec %q: no prompt: %v", cmd, w)
	}
	return b.get("blocks/" + id)["block"].(map[string]any)
}

// spool returns the whole spool through read_spool.
func (b *bridge) spool() []byte {
	b.t.Helper()
	var out []byte
	var cur int64
	for {
		r := b.post("read_spool", map[string]any{"from_cursor": cur, "max_bytes": 1 << 20, "raw": true})
		d := r["data"].(string)
		out = append(out, d...)
		if num(r["resume_cursor"]) == cur {
			return out
		}
		cur = num(r["resume_cursor"])
	}
}

// barrier makes every commit the API has shown visible to log readers.
// The engine feeds observers (and so the API) before the log's LastSeq
// moves past the same commit; an append returns only after LastSeq covers
// it and everything before it. The event goes to a stream of its own.
func (b *bridge) barrier() {
	b.t.Helper()
	if b.srv == nil {
		return // closed: every append has returned
	}
	ev := events.MustNew("test-barrier", &events.PtySessionEnded{ShellID: "test-barrier", Reason: "test barrier"})
	if _, err := b.eng.Append(context.Background(), ev); err != nil {
		b.t.Fatal(err)
	}
}

// logBlocks returns, per block id, the BEGIN and END events in the log.
func (b *bridge) logBlocks() (begins, ends map[string][]events.Block) {
	b.t.Helper()
	begins, ends = map[string][]events.Block{}, map[string][]events.Block{}
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			b.t.Fatal(err)
		}
		switch ev.Type {
		case events.TypePtyBlockBegin:
			d, _ := events.DecodeAs[*events.PtyBlockBegin](ev)
			begins[d.Block.BlockID] = append(begins[d.Block.BlockID], d.Block)
		case events.TypePtyBlockEnd:
			d, _ := events.DecodeAs[*events.PtyBlockEnd](ev)
			ends[d.Block.BlockID] = append(ends[d.Block.BlockID], d.Block)
		}
	}
	return begins, ends
}

// checkLifecycles asserts exactly one BEGIN and one END per block.
func (b *bridge) checkLifecycles() map[string]events.Block {
	b.t.Helper()
	b.barrier()
	begins, ends := b.logBlocks()
	final := map[string]events.Block{}
	for id, bs := range begins {
		if len(bs) != 1 || len(ends[id]) != 1 {
			b.t.Errorf("block %s: %d BEGIN, %d END; want 1 and 1", id, len(bs), len(ends[id]))
			continue
		}
		final[id] = ends[id][0]
	}
	for id := range ends {
		if _, ok := begins[id]; !ok {
			b.t.Errorf("block %s: END without BEGIN", id)
		}
	}
	b.checkDiskViews(final)
	return final
}

// checkDiskViews compares the projected files with what the API serves:
// output.spool with the spool, blocks/<id>.out with each block's output,
// blocks.jsonl with the log's final block records.
func (b *bridge) checkDiskViews(final map[string]events.Block) {
	b.t.Helper()
	if b.srv == nil {
		return // closed
	}
	dir, _ := b.home.PtyDir(b.conv)
	disk, err := os.ReadFile(filepath.Join(dir, "output.spool"))
	if err != nil {
		b.t.Errorf("output.spool: %v", err)
		return
	}
	if sp := b.spool(); !bytes.Equal(disk, sp) {
		b.t.Errorf("output.spool (%d bytes) differs from read_spool (%d bytes)", len(disk), len(sp))
	}
	fb, ok := b.blocksFile()
	if !ok {
		b.t.Errorf("no blocks.jsonl")
	}
	for _, raw := range b.get("blocks")["blocks"].([]any) {
		id := raw.(map[string]any)["block_id"].(string)
		blk := final[id]
		if fb != nil {
			if got := fb[id]; got.Status != blk.Status || got.Reason != blk.Reason {
				b.t.Errorf("blocks.jsonl %+v, log %+v", got, blk)
			}
		}
		out, err := os.ReadFile(filepath.Join(dir, "blocks", id+".out"))
		if err != nil && !os.IsNotExist(err) {
			b.t.Errorf("%s.out: %v", id, err)
		}
		api := b.get("blocks/" + id + "/output?max_bytes=4194304")
		if string(out) != api["data"].(string) {
			b.t.Errorf("blocks/%s.out = %q, API output %q", id, out, api["data"])
		}
	}
}

// blocksFile reads pty/<conv>/blocks.jsonl (last line per block wins), if
// the projector wrote it.
func (b *bridge) blocksFile() (map[string]events.Block, bool) {
	dir, _ := b.home.PtyDir(b.conv)
	raw, err := os.ReadFile(filepath.Join(dir, "blocks.jsonl"))
	if err != nil {
		return nil, false
	}
	out := map[string]events.Block{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var blk events.Block
		if err := json.Unmarshal([]byte(line), &blk); err != nil {
			b.t.Fatalf("blocks.jsonl: %v: %q", err, line)
		}
		out[blk.BlockID] = blk
	}
	return out, true
}

// TestCursorSemantics is seed 001 §8.1.
func TestCursorSemantics(t *testing.T) {
	b := newBridge(t)
	r := b.post("exec_block", map[string]any{"cmd": `printf "hello\nworld\n"`})
	if r["ok"] != true || !strings.HasPrefix(r["block_id"].(string), "blk_") || num(r["seq"]) != 1 || num(r["ts"]) == 0 {
		t.Fatalf("exec_block = %v", r)
	}
	w1 := b.post("wait_for", map[string]any{"match": "hello", "match_type": "substring", "from_cursor": 0, "timeout_ms": 20000})
	if _, ok := w1["next_cursor"]; ok {
		t.Fatalf("wait_for has next_cursor: %v", w1)
	}
	span := w1["match_span"].(map[string]any)
	if w1["matched"] != true || w1["match_text"] != "hello" || num(w1["resume_cursor"]) != num(span["end"]) || num(span["end"])-num(span["start"]) != 5 {
		t.Fatalf("wait_for hello = %v", w1)
	}
	w2 := b.post("wait_for", map[string]any{"match": "world", "from_cursor": w1["resume_cursor"], "timeout_ms": 20000})
	if w2["matched"] != true || num(w2["match_cursor"]) != num(w1["resume_cursor"])+1 {
		t.Fatalf("wait_for world = %v (after %v)", w2, w1)
	}
	b.post("wait_prompt", map[string]any{"from_cursor": w2["resume_cursor"], "timeout_ms": 20000})
	w3 := b.post("wait_for", map[string]any{"match": "hello", "from_cursor": w2["resume_cursor"], "timeout_ms": 300})
	size := num(b.get("status")["resume_cursor"])
	if w3["ok"] != false || w3["matched"] != false || w3["error"] != "timeout" || num(w3["resume_cursor"]) != size {
		t.Fatalf("timeout = %v, spool size %d", w3, size)
	}
	for _, k := range []string{"next_cursor", "cursor", "match_span"} {
		if _, ok := w3[k]; ok {
			t.Fatalf("timeout response has %s: %v", k, w3)
		}
	}
	sp := b.spool()
	if int64(len(sp)) != size {
		t.Fatalf("spool %d bytes, status says %d", len(sp), size)
	}
	if !bytes.Contains(sp, []byte("hello\nworld\n__FWS_PROMPT__ ts=")) {
		t.Fatalf("spool = %q", sp)
	}
	final := b.checkLifecycles()
	if len(final) != 1 {
		t.Fatalf("blocks = %v", final)
	}
	for _, blk := range final {
		if blk.Status != events.BlockCompleted || blk.ExitCode == nil || *blk.ExitCode != 0 {
			t.Fatalf("block = %+v", blk)
		}
	}
}

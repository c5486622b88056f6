package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/wal"
)

// boundTimeouts rewrites every timeout_ms of a JSON object body (any case,
// as encoding/json matches keys) into 1–50 ms so that no input makes a
// wait block the fuzzer; ok is false for bodies that could decode into a
// wait with the server's default timeout (null).
func boundTimeouts(body []byte) ([]byte, bool) {
	if !json.Valid(body) {
		t := bytes.TrimSpace(body)
		return body, len(t) > 0 && t[0] != '{' && t[0] != 'n'
	}
	var v any
	if json.Unmarshal(body, &v) != nil || v == nil {
		return nil, false
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return body, true
	}
	t := 50.0
	for k, x := range m {
		if strings.EqualFold(k, "timeout_ms") {
			if f, ok := x.(float64); ok && f >= 1 && f <= 50 {
				t = f
			}
			delete(m, k)
		}
	}
	m["timeout_ms"] = t
	b, err := json.Marshal(m)
	return b, err == nil
}

// FuzzPtyBodies sends arbitrary bodies to the terminal routes that read or
// wait but never type into the shell (wait_for, wait_prompt, read_spool),
// on a live conversation and on unknown ones. Properties: never a 5xx or a
// panic; errors are envelopes; these routes append nothing to the log; a
// 200 answer is JSON whose resume_cursor, when present, is not negative.
func FuzzPtyBodies(f *testing.F) {
	ctx := context.Background()
	dir := f.TempDir()
	h := home.Home{Dir: filepath.Join(dir, "home")}
	eng, err := engine.Open(ctx, engine.Options{Home: h, NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	mgr, err := pty.NewManager(eng, pty.Options{Dir: dir, MaxShells: 2})
	if err != nil {
		eng.Close()
		f.Fatal(err)
	}
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: "127.0.0.1:0", OperatorToken: "tok", SessionID: "lab_pty", Pty: mgr})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close(); mgr.Close(ctx); eng.Close() })
	post := func(path string, body []byte) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "http://127.0.0.1:7788"+path, bytes.NewReader(body))
		r.Header.Set("X-CM-LAB-TOKEN", "tok")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, r)
		return rec
	}
	// exec_wait answers once the block has ended (its END and prompt in
	// the log), so nothing of the setup is still being appended when the
	// bodies below are checked for appending nothing; a wait_prompt from
	// cursor 0 could answer at the shell's first prompt, before the block.
	if rec := post("/api/pty/conv1/exec_wait", []byte(`{"cmd":"printf 'hello\\r\\nworld\\n'","timeout_ms":15000}`)); rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"status":"completed"`)) {
		f.Fatalf("setup exec_wait: %d %s", rec.Code, rec.Body.Bytes())
	}
	// exec_wait answers once the block's END is durable and the terminal's
	// model has it, which the log does before it moves its LastSeq
	// (wal.Log.syncPending: Apply, then last): wait for LastSeq to reach
	// what the log's files hold, or the first body below would see the
	// setup's last events land (1 run in 40 under -race).
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		f.Fatal(err)
	}
	onDisk, err := r.LastSeq()
	if err != nil {
		f.Fatal(err)
	}
	for deadline := time.After(10 * time.Second); ; {
		changed := eng.Log().Changed()
		if eng.Log().LastSeq() >= onDisk {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			f.Fatalf("the log's LastSeq %d never reached %d, the last seq in its files", eng.Log().LastSeq(), onDisk)
		}
	}
	routes := []string{
		"/api/pty/conv1/wait_for", "/api/pty/conv1/wait_prompt", "/api/pty/conv1/read_spool",
		"/api/pty/nope/wait_for", "/api/pty/nope/read_spool", "/api/pty/..%2f/read_spool",
	}
	f.Add(uint8(0), []byte(`{"match":"world","match_type":"substring","from_cursor":0}`))
	f.Add(uint8(0), []byte(`{"match":"(a+)+$","match_type":"regex","from_cursor":3}`))
	f.Add(uint8(0), []byte(`{"match":"","match_type":"prompt","from_cursor":-1}`))
	f.Add(uint8(0), []byte(`{"match":"[","match_type":"regex"}`))
	f.Add(uint8(1), []byte(`{"from_cursor":99999999}`))
	f.Add(uint8(2), []byte(`{"from_cursor":0,"max_bytes":5}`))
	f.Add(uint8(2), []byte(`{"from_cursor":1,"max_bytes":-1}`))
	f.Add(uint8(3), []byte(`{"match":"x"}`))
	f.Add(uint8(4), []byte(`garbage`))
	f.Fuzz(func(t *testing.T, idx uint8, raw []byte) {
		body, ok := boundTimeouts(raw)
		if !ok {
			return
		}
		route := routes[int(idx)%len(routes)]
		before := eng.Log().LastSeq()
		rec := post(route, body)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: %d %s", route, body, rec.Code, rec.Body.Bytes())
		}
		if eng.Log().LastSeq() != before {
			t.Fatalf("%s %s appended %d events", route, body, eng.Log().LastSeq()-before)
		}
		if rec.Code != http.StatusOK {
			var env struct {
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &env) != nil || env.Error == nil || env.Error.Code == "" {
				t.Fatalf("%s %s: %d without an error envelope: %s", route, body, rec.Code, rec.Body.Bytes())
			}
			return
		}
		var res struct {
			ResumeCursor *int64 `json:"resume_cursor"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatalf("%s: 200 that is not JSON: %s", route, rec.Body.Bytes())
		}
		if res.ResumeCursor != nil && *res.ResumeCursor < 0 {
			t.Fatalf("%s %s: negative resume_cursor %d", route, body, *res.ResumeCursor)
		}
	})
}

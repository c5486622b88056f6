package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
)

// apiTarget is a Lab/steps server over a fresh home, with a few runs, an
// experiment and a planned mandate to aim requests at.
type apiTarget struct {
	eng    *engine.Engine
	h      http.Handler
	routes []string
}

func newAPITarget(tb testing.TB, dir string) *apiTarget {
	tb.Helper()
	ctx := context.Background()
	hm := home.Home{Dir: filepath.Join(dir, "home")}
	root := filepath.Join(dir, "runs")
	eng, err := engine.Open(ctx, engine.Options{Home: hm, NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: "127.0.0.1:0", OperatorToken: "tok", SessionID: "lab_fuzz", AllowedRoots: []string{root}})
	if err != nil {
		eng.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close(); eng.Close() })
	a := &apiTarget{eng: eng, h: srv.Handler()}
	mustOK := func(path string, body any) map[string]any {
		b, _ := json.Marshal(body)
		rec := a.post(path, "", b)
		if rec.Code != http.StatusOK {
			tb.Fatalf("setup %s: %d %s", path, rec.Code, rec.Body.Bytes())
		}
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		return m
	}
	var runs []string
	for _, name := range []string{"a", "b"} {
		d := filepath.Join(root, name)
		os.MkdirAll(d, 0o700)
		for _, f := range []string{"script.json", "score.json", "timestamps.json", "visuals.json"} {
			os.WriteFile(filepath.Join(d, f), []byte(`{"run":"`+name+`"}`), 0o600)
		}
		os.WriteFile(filepath.Join(d, "video.mp4"), []byte("not really a video "+name), 0o600)
		runs = append(runs, mustOK("/api/runs/import", map[string]string{"path": d})["runId"].(string))
	}
	exp := mustOK("/api/experiments", map[string]any{"name": "e", "hypothesis": "h", "topic": "t", "baselineRunId": runs[0],
		"variants": []map[string]string{{"label": "B", "runId": runs[1]}}})["experimentId"].(string)
	mustOK("/api/steps/m1/plan", map[string]any{"steps": []map[string]string{{"step_id": "s1", "tool": "sh", "params_hash": "sha256-" + strings.Repeat("0", 64), "idem_key": "k1"}}})
	a.routes = []string{
		"/api/feedback", "/api/runs/import", "/api/experiments", "/api/experiments/" + exp + "/submit",
		"/api/experiments/exp_missing/submit", "/api/export",
		"/api/steps/m1/plan", "/api/steps/m1/executing", "/api/steps/m1/completed", "/api/steps/m1/failed",
		"/api/steps/m1/review", "/api/steps/m1/reset", "/api/steps/m2/plan", "/api/recovery/apply",
	}
	return a
}

func (a *apiTarget) post(path, reqID string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "http://127.0.0.1:7788"+path, bytes.NewReader(body))
	r.Header.Set("X-CM-LAB-TOKEN", "tok")
	r.Header.Set("Content-Type", "application/json")
	if reqID != "" {
		r.Header.Set("X-CM-LAB-REQUEST-ID", reqID)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	return rec
}

var statusOfCode = map[string]int{
	"INVALID_ARGUMENT": 400, "INVALID_CURSOR": 400, "INVALID_JSON": 400, "UNAUTHORIZED": 401, "FORBIDDEN": 403,
	"NOT_FOUND": 404, "FILE_NOT_FOUND": 404, "BUSY": 409, "IDEMPOTENCY_KEY_REUSED": 409, "PAYLOAD_TOO_LARGE": 413,
}

// FuzzPOSTBodies sends arbitrary bodies (and request ids) to every Lab and
// step POST route of the API handler and checks: the answer is 200 or a
// 4xx error envelope whose code matches its status, never a 5xx or a
// panic; a 4xx appends nothing to the log; a 200 with a request id, sent
// again, is a replay with the same body that appends nothing. (Terminal
// routes are left out: their bodies run shell commands.)
func FuzzPOSTBodies(f *testing.F) {
	a := newAPITarget(f, f.TempDir())
	for i := range a.routes {
		f.Add(uint8(i), []byte(`{}`), "")
		f.Add(uint8(i), []byte(`{"requestId":"r1","notes":"n","ratings":{"overall":50}}`), "")
		f.Add(uint8(i), []byte(`not json`), "rq")
	}
	f.Add(uint8(0), []byte(`{"ratings":{"overall":101}}`), "r2")
	f.Add(uint8(0), []byte(`{"ratings":{"overall":1.5},"tags":"x"}`), "")
	f.Add(uint8(1), []byte(`{"path":"../../etc"}`), "")
	f.Add(uint8(5), []byte(`{"sessionId":"lab_fuzz","path":"../../x.json"}`), "")
	f.Add(uint8(6), []byte(`{"steps":[{"step_id":"s2","tool":"t","params_hash":"sha256-00","idem_key":"k"}]}`), "p1")
	f.Add(uint8(7), []byte(`{"step_id":"s1","idem_key":"k1","observed_pre_hash":"sha256-`+strings.Repeat("a", 64)+`"}`), "")
	f.Fuzz(func(t *testing.T, routeIdx uint8, body []byte, reqID string) {
		route := a.routes[int(routeIdx)%len(a.routes)]
		before := a.eng.Log().LastSeq()
		rec := a.post(route, reqID, body)
		check := func(rec *httptest.ResponseRecorder, what string) {
			if rec.Code >= 500 {
				t.Fatalf("%s %s: %d %s", what, route, rec.Code, rec.Body.Bytes())
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Fatalf("%s %s: content type %q", what, route, ct)
			}
			if rec.Code == http.StatusOK {
				if !json.Valid(rec.Body.Bytes()) {
					t.Fatalf("%s %s: 200 with a body that is not JSON: %q", what, route, rec.Body.Bytes())
				}
				return
			}
			var env struct {
				Error *struct {
					Code    string         `json:"code"`
					Message string         `json:"message"`
					Context map[string]any `json:"context"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" || env.Error.Context == nil {
				t.Fatalf("%s %s: %d without an error envelope: %q", what, route, rec.Code, rec.Body.Bytes())
			}
			if want, ok := statusOfCode[env.Error.Code]; !ok || want != rec.Code {
				t.Fatalf("%s %s: code %s with status %d", what, route, env.Error.Code, rec.Code)
			}
		}
		check(rec, "first")
		after := a.eng.Log().LastSeq()
		if rec.Code != http.StatusOK {
			if after != before {
				t.Fatalf("%s answered %d but appended %d events: %s", route, rec.Code, after-before, rec.Body.Bytes())
			}
			return
		}
		if strings.TrimSpace(reqID) == "" {
			return
		}
		again := a.post(route, reqID, body)
		check(again, "retry")
		if after == before {
			// Nothing was appended (a no-op, e.g. an empty recovery plan):
			// there is no request record to replay, but the retry must
			// append nothing either.
			if a.eng.Log().LastSeq() != after {
				t.Fatalf("retry of no-op %s appended %d events", route, a.eng.Log().LastSeq()-after)
			}
			return
		}
		if again.Code != http.StatusOK || again.Header().Get("X-CM-LAB-IDEMPOTENT-REPLAY") != "true" {
			t.Fatalf("retry of %s with request id %q: %d replay=%q %s", route, reqID, again.Code, again.Header().Get("X-CM-LAB-IDEMPOTENT-REPLAY"), again.Body.Bytes())
		}
		if !bytes.Equal(bytes.TrimSpace(again.Body.Bytes()), bytes.TrimSpace(rec.Body.Bytes())) {
			t.Fatalf("retry of %s answered %s, first %s", route, again.Body.Bytes(), rec.Body.Bytes())
		}
		if a.eng.Log().LastSeq() != after {
			t.Fatalf("retry of %s appended %d events", route, a.eng.Log().LastSeq()-after)
		}
	})
}

package labapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// newPtyLab is newTestLab with a terminal manager (shells start in the
// home), closed before the engine.
func newPtyLab(t *testing.T, mod ...func(*Options)) *testLab {
	t.Helper()
	var mgr *pty.Manager
	tl := newTestLab(t, append([]func(*Options){func(o *Options) {
		m, err := pty.NewManager(o.Engine, pty.Options{})
		if err != nil {
			t.Fatal(err)
		}
		mgr, o.Pty = m, m
	}}, mod...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := mgr.Close(ctx); err != nil {
			t.Errorf("terminal manager close: %v", err)
		}
	})
	return tl
}

// labTokenFromConfig is what any loopback client gets: GET /api/config
// without a token.
func labTokenFromConfig(t *testing.T, tl *testLab) string {
	t.Helper()
	r := tl.do("GET", "/api/config", "", "X-CM-LAB-TOKEN", "")
	tok, _ := r.json(t)["token"].(string)
	if r.status != 200 || tok == "" {
		t.Fatalf("config: %d %s", r.status, r.body)
	}
	if tok == tl.token {
		t.Fatal("/api/config serves the operator token")
	}
	return tok
}

// operatorRoute is one request on a route that needs the operator token,
// and what the operator gets.
type operatorRoute struct {
	pattern      string // as registered
	method, path string
	body         string
	status       int    // with the operator token
	want         string // substring of that answer
}

// operatorRoutes covers every pattern registered with authAlways or
// authAlwaysRead (TestOperatorRoutesCoverEveryRoute holds it to that).
// They run in order on one conversation c1, whose shell runs `echo`.
func operatorRoutes() []operatorRoute {
	const p = "/api/pty/c1/"
	const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	plan := `{"name":"n","steps":[{"step_id":"a","tool":"sh","params_hash":"` + stepHash("1") + `","pre_hash":"` + stepHash("2") + `"}]}`
	return []operatorRoute{
		{"POST /api/pty/{conversationId}/exec_block", "POST", p + "exec_block", `{"cmd":"echo operator-$((6*7))"}`, 200, `"ok":true`},
		{"POST /api/pty/{conversationId}/wait_prompt", "POST", p + "wait_prompt", `{"from_cursor":0,"timeout_ms":10000}`, 200, ""},
		{"POST /api/pty/{conversationId}/wait_for", "POST", p + "wait_for", `{"match":"operator-42","match_type":"substring","from_cursor":0,"timeout_ms":10000}`, 200, ""},
		{"POST /api/pty/{conversationId}/read_spool", "POST", p + "read_spool", `{"cursor":0}`, 200, "operator-42"},
		{"GET /api/pty/{conversationId}/status", "GET", p + "status", "", 200, ""},
		{"GET /api/pty/{conversationId}/blocks", "GET", p + "blocks?since=0", "", 200, ""},
		{"GET /api/pty/{conversationId}/blocks/{blockId}", "GET", p + "blocks/blk_nope", "", 404, ""},
		{"GET /api/pty/{conversationId}/blocks/{blockId}/output", "GET", p + "blocks/blk_nope/output", "", 404, ""},
		{"GET /api/pty/{conversationId}/search", "GET", p + "search?q=operator", "", 200, "operator-42"},
		{"POST /api/pty/{conversationId}/exec_interactive", "POST", p + "exec_interactive", `{"cmd":"cat"}`, 200, ""},
		{"POST /api/pty/{conversationId}/send", "POST", p + "send", `{"data":"typed\n"}`, 200, ""},
		{"POST /api/pty/{conversationId}/expect_send", "POST", p + "expect_send", `{"expect":"typed","send":"\u0004","timeout_ms":10000}`, 200, ""},
		{"POST /api/pty/{conversationId}/interrupt", "POST", p + "interrupt", `{}`, 200, `"ok":true`},
		{"GET /api/pty", "GET", "/api/pty", "", 200, `"max_shells"`},
		{"POST /api/pty/{conversationId}/end_session", "POST", p + "end_session", `{}`, 200, ""},
		{"POST /api/pty/{conversationId}/reset", "POST", p + "reset", `{}`, 200, ""},
		{"POST /api/pty/{conversationId}/exec_wait", "POST", p + "exec_wait", `{"cmd":"echo waited-$((6*7))","timeout_ms":10000}`, 200, `"output":"waited-42\n"`},
		{"POST /api/steps/{mandateId}/plan", "POST", "/api/steps/m1/plan", plan, 200, `"status":"planned"`},
		{"POST /api/steps/{mandateId}/executing", "POST", "/api/steps/m1/executing", `{"step_id":"a","observed_pre_hash":"` + stepHash("2") + `"}`, 200, `"status":"executing"`},
		{"POST /api/steps/{mandateId}/completed", "POST", "/api/steps/m1/completed", `{"step_id":"a","post_hash":"` + stepHash("4") + `","result_hash":"` + stepHash("5") + `","exit_code":0}`, 200, `"status":"completed"`},
		{"POST /api/steps/{mandateId}/failed", "POST", "/api/steps/m1/failed", `{"step_id":"zz","error_class":"x"}`, 404, ""},
		{"POST /api/steps/{mandateId}/review", "POST", "/api/steps/m1/review", `{"step_id":"zz","reason":"r"}`, 404, ""},
		{"POST /api/steps/{mandateId}/reset", "POST", "/api/steps/m1/reset", `{"step_id":"zz"}`, 404, ""},
		{"POST /api/steps/{mandateId}/cancel", "POST", "/api/steps/zz/cancel", `{}`, 404, ""},
		{"POST /api/steps/{mandateId}/approve", "POST", "/api/steps/m1/approve", `{"step_id":"zz"}`, 404, ""},
		{"GET /api/steps", "GET", "/api/steps?mandateId=m1", "", 200, `"status":"completed"`},
		{"GET /api/recovery/plan", "GET", "/api/recovery/plan", "", 200, ""},
		{"POST /api/recovery/apply", "POST", "/api/recovery/apply", `{}`, 200, ""},
		{"GET /metrics", "GET", "/metrics", "", 200, "cmlab_wal_appends_total"},
		{"POST /api/console/login-code", "POST", "/api/console/login-code", "", 200, `"code"`},
		{"POST /api/console/revoke", "POST", "/api/console/revoke", "", 200, `"ended"`},
		{"GET /api/console/overview", "GET", "/api/console/overview", "", 200, `"health"`},
		{"GET /api/console/log", "GET", "/api/console/log?type=step.", "", 200, `"step.planned"`},
		{"GET /api/console/trace", "GET", "/api/console/trace?id=m1/a", "", 200, `"step.completed"`},
		{"GET /api/console/recovery", "GET", "/api/console/recovery", "", 200, `MANDATE`},
		{"GET /api/console/pty", "GET", "/api/console/pty", "", 200, `"c1"`},
		{"POST /api/console/travel", "POST", "/api/console/travel", `{"seq":1}`, 200, `"lastSeq":1`},
		{"GET /api/console/travel/compare", "GET", "/api/console/travel/compare?a=x&b=y", "", 404, ""},
		{"GET /api/console/travel/{id}/file", "GET", "/api/console/travel/x/file?path=feedback.jsonl", "", 404, ""},
		{"POST /api/console/check", "POST", "/api/console/check", "", 200, `"identical"`},
		{"GET /api/console/pty/{conversationId}/blocks/{blockId}/screen", "GET", "/api/console/pty/c1/blocks/blk_nope/screen", "", 404, ""},
		{"GET /api/console/pty/{conversationId}/blocks/{blockId}/frames", "GET", "/api/console/pty/c1/blocks/blk_nope/frames", "", 404, ""},
		{"GET /api/console/pty/{conversationId}/recording", "GET", "/api/console/pty/c1/recording?block=blk_nope", "", 404, ""},
		{"GET /api/console/pty/{conversationId}/playback", "GET", "/api/console/pty/c1/playback?block=blk_nope", "", 404, ""},
		{"POST /mcp", "POST", "/mcp", mcpInit, 200, "protocolVersion"},
		{"GET /mcp", "GET", "/mcp", "", 400, ""},
		{"DELETE /mcp", "DELETE", "/mcp", "", 400, ""},
	}
}

// TestOperatorRoutesRefuseLabToken is the finding of issue 15 §1: the Lab
// token that /api/config hands to any loopback client opened a shell.
// Every route outside the Lab answers the Lab token (header or bearer),
// no token and a wrong one with 401 UNAUTHORIZED whose fix names the
// operator token's file — and changes nothing; the operator token works.
func TestOperatorRoutesRefuseLabToken(t *testing.T) {
	tl := newPtyLab(t)
	lab := labTokenFromConfig(t, tl)
	mcpHdr := []string{"Accept", "application/json, text/event-stream", "Content-Type", "application/json"}
	refused := 0 // each refused request carries request id refused-N
	t.Cleanup(func() {
		// The shell keeps writing events (output, prompts) on its own, so
		// "nothing changed" is: no event of the log carries a refused
		// request's id (every act records its request id).
		acted := false
		for ev, err := range tl.eng.Log().Events(1) {
			if err != nil {
				t.Fatal(err)
			}
			acted = acted || ev.Req == "ok-POST /api/pty/{conversationId}/exec_block"
			if strings.HasPrefix(ev.Req, "refused-") {
				t.Errorf("a refused request acted: event %d %s carries request id %s", ev.Seq, ev.Type, ev.Req)
			}
		}
		if !acted {
			t.Error("the operator's exec_block left no event with its request id: the check above proves nothing")
		}
		if refused < 4*len(operatorRoutes()) {
			t.Errorf("only %d refused requests", refused)
		}
	})
	for _, rt := range operatorRoutes() {
		t.Run(rt.pattern, func(t *testing.T) {
			hdr := mcpHdr
			for _, bad := range [][]string{
				{"X-CM-LAB-TOKEN", lab},
				{"X-CM-LAB-TOKEN", "", "Authorization", "Bearer " + lab},
				{"X-CM-LAB-TOKEN", ""},
				{"X-CM-LAB-TOKEN", "wrong"},
			} {
				refused++
				r := tl.do(rt.method, rt.path, rt.body, append(append([]string{"X-CM-LAB-REQUEST-ID", fmt.Sprint("refused-", refused)}, hdr...), bad...)...)
				if r.status != 401 || r.code() != CodeUnauthorized {
					t.Fatalf("with %v: %d %s, want 401 UNAUTHORIZED", bad, r.status, truncate(string(r.body), 300))
				}
				var env struct {
					Error struct {
						Message string `json:"message"`
						Context struct {
							Fix string `json:"fix"`
						} `json:"context"`
					} `json:"error"`
				}
				json.Unmarshal(r.body, &env)
				if !strings.Contains(env.Error.Context.Fix, "operator token") || !strings.Contains(env.Error.Context.Fix, "state/token") {
					t.Fatalf("fix %q does not name the operator token in state/token", env.Error.Context.Fix)
				}
				if bad[1] == lab && !strings.Contains(env.Error.Message, "Lab token") {
					t.Fatalf("message %q does not say the Lab token opens the Lab only", env.Error.Message)
				}
			}
			r := tl.do(rt.method, rt.path, rt.body, append([]string{"X-CM-LAB-REQUEST-ID", "ok-" + rt.pattern}, hdr...)...)
			if r.status != rt.status || !strings.Contains(string(r.body), rt.want) {
				t.Fatalf("with the operator token: %d %s, want %d with %q", r.status, truncate(string(r.body), 400), rt.status, rt.want)
			}
		})
	}
}

// TestOperatorRoutesCoverEveryRoute: the table above names every route
// that needs the operator token, and every other route is a Lab route, a
// public one (config, health) or the event stream.
func TestOperatorRoutesCoverEveryRoute(t *testing.T) {
	tl := newPtyLab(t, func(o *Options) { o.UIDir = t.TempDir() })
	inTable := map[string]bool{}
	for _, rt := range operatorRoutes() {
		inTable[rt.pattern] = true
	}
	lab := map[string]bool{
		"GET /api/session": true, "GET /api/feedback": true, "POST /api/feedback": true,
		"POST /api/runs/import": true, "GET /api/runs": true, "GET /api/runs/{runId}": true,
		"GET /api/runs/{runId}/video": true, "GET /api/runs/{runId}/artifact/{name}": true,
		"POST /api/experiments": true, "GET /api/experiments": true, "GET /api/experiments/{experimentId}": true,
		"POST /api/experiments/{experimentId}/submit": true, "POST /api/export": true,
		"GET /api/runs/{runId}/feedback": true, "GET /api/exports/{name}": true,
	}
	public := map[string]bool{"GET /api/config": true, "GET /api/health": true, "GET /{$}": true, "GET /index.html": true, "GET /lab/{path...}": true,
		"GET /console/login": true, "GET /console/{file...}": true, "GET /console": true}
	seen := map[string]bool{}
	for _, r := range tl.srv.routes {
		seen[r.pattern] = true
		switch r.auth {
		case authAlways, authAlwaysRead:
			if !inTable[r.pattern] {
				t.Errorf("route %s needs the operator token but is not in operatorRoutes", r.pattern)
			}
		case authPostOnly:
			if !lab[r.pattern] {
				t.Errorf("route %s is open to the Lab token but is not a Lab route", r.pattern)
			}
		case authNone:
			if !public[r.pattern] {
				t.Errorf("route %s needs no token", r.pattern)
			}
		case authLabStream:
			if r.pattern != "GET /api/events" {
				t.Errorf("route %s is a Lab stream", r.pattern)
			}
		}
	}
	for p := range inTable {
		if !seen[p] {
			t.Errorf("operatorRoutes names %s, which is not registered", p)
		}
	}
}

// TestLabTokenOpensLabRoutes: the Lab token still does what content-
// machine's browser client needs: POST feedback, import, experiments,
// export.
func TestLabTokenOpensLabRoutes(t *testing.T) {
	tl := newTestLab(t)
	lab := labTokenFromConfig(t, tl)
	dir := tl.mkRun("a", map[string]string{"video.mp4": "v"})
	b, _ := json.Marshal(map[string]string{"path": dir})
	for _, c := range []struct{ path, body string }{
		{"/api/feedback", `{"notes":"from the Lab"}`},
		{"/api/runs/import", string(b)},
		{"/api/export", `{"sessionId":"lab_test"}`},
	} {
		if r := tl.do("POST", c.path, c.body, "X-CM-LAB-TOKEN", lab); r.status != 200 {
			t.Fatalf("POST %s with the Lab token: %d %s", c.path, r.status, r.body)
		}
	}
}

// TestLabEventStreamHidesTerminal: /api/events with the Lab token carries
// the Lab's events only — not the terminal's input and output, nor the
// idempotency snapshots that hold terminal answers; with the operator
// token it carries every event. Seqs are the log's in both.
func TestLabEventStreamHidesTerminal(t *testing.T) {
	tl := newPtyLab(t)
	lab := labTokenFromConfig(t, tl)
	if r := tl.do("POST", "/api/feedback", `{"notes":"before"}`, "X-CM-LAB-REQUEST-ID", "fb-1"); r.status != 200 {
		t.Fatalf("feedback: %d %s", r.status, r.body)
	}
	if r := tl.do("POST", "/api/pty/c1/exec_block", `{"cmd":"echo secret-$((6*7))"}`, "X-CM-LAB-REQUEST-ID", "ex-1"); r.status != 200 {
		t.Fatalf("exec_block: %d %s", r.status, r.body)
	}
	if r := tl.do("POST", "/api/pty/c1/wait_prompt", `{"timeout_ms":10000}`); r.status != 200 {
		t.Fatalf("wait_prompt: %d %s", r.status, r.body)
	}
	if r := tl.do("POST", "/api/feedback", `{"notes":"after"}`); r.status != 200 {
		t.Fatalf("feedback: %d %s", r.status, r.body)
	}
	read := func(hdr, query string) (types []string, seqs []uint64, body string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", tl.hs.URL+"/api/events?since=0"+query, nil)
		if hdr != "" {
			req.Header.Set("X-CM-LAB-TOKEN", hdr)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("events: %d", res.StatusCode)
		}
		// The stream never ends: read up to the second feedback (a Lab
		// event, so both streams carry it).
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var sb strings.Builder
		for sc.Scan() {
			line := sc.Text()
			sb.WriteString(line + "\n")
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				var se StreamEvent
				if err := json.Unmarshal([]byte(d), &se); err != nil {
					t.Fatal(err)
				}
				types, seqs = append(types, se.Type), append(seqs, se.Seq)
				if se.Type == events.TypeFeedbackSubmitted && strings.Contains(d, `"notes":"after"`) {
					return types, seqs, sb.String()
				}
			}
		}
		t.Fatalf("stream ended before the second feedback: %v", sc.Err())
		return
	}
	labTypes, labSeqs, labBody := read(lab, "")
	for _, ty := range labTypes {
		if !labStreamTypes[ty] {
			t.Fatalf("Lab stream carries %s (types %v)", ty, labTypes)
		}
	}
	if strings.Contains(labBody, "pty.") || strings.Contains(labBody, "secret") {
		t.Fatalf("Lab stream carries terminal input or output:\n%s", labBody)
	}
	if q, _, _ := read("", "&token="+lab); strings.Join(q, ",") != strings.Join(labTypes, ",") {
		t.Fatalf("?token= stream %v, header stream %v", q, labTypes)
	}
	opTypes, opSeqs, opBody := read(tl.token, "")
	for i, s := range opSeqs {
		if s != uint64(i+1) {
			t.Fatalf("operator stream skips: seqs %v", opSeqs)
		}
	}
	if len(labSeqs) != 2 || len(opSeqs) <= len(labSeqs) || !strings.Contains(opBody, "event: pty.output") || !strings.Contains(opBody, "secret") {
		t.Fatalf("operator stream: %d events, Lab stream %d; types %v", len(opSeqs), len(labSeqs), opTypes)
	}
	n := 0
	for _, ty := range opTypes {
		if ty == events.TypeFeedbackSubmitted {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("operator stream has %d feedback events, want 2", n)
	}
	// The operator token is never taken from the URL (it would end up in
	// logs and histories).
	if r := tl.do("GET", "/api/events?token="+tl.token, "", "X-CM-LAB-TOKEN", ""); r.status != 401 {
		t.Fatalf("operator token in the query: %d %s", r.status, r.body)
	}
}

// TestOriginMustBeExact (issue 15 §4): an Origin is accepted only when it
// is exactly "http://" + the Host the request was sent to, with the
// daemon's port; `http://localhost` without a port was accepted before.
func TestOriginMustBeExact(t *testing.T) {
	tl := newTestLab(t)
	port := tl.hs.URL[strings.LastIndex(tl.hs.URL, ":")+1:]
	cases := []struct {
		origin, host string
		status       int
	}{
		{"http://localhost", "localhost:" + port, 403},
		{"http://localhost", "localhost", 403},
		{"http://127.0.0.1", "", 403},
		{"https://127.0.0.1:" + port, "", 403},
		{"http://127.0.0.1:" + port + "/", "", 403},
		{"http://127.0.0.1:1", "", 403},
		{"http://127.0.0.1:" + port + ".evil.example", "", 403},
		{"http://localhost:" + port, "", 403}, // sent to 127.0.0.1: another origin
		{"http://127.0.0.1:" + port, "localhost:" + port, 403},
		{"http://LOCALHOST:" + port, "localhost:" + port, 403},
		{"http://localhost:" + port + "@evil.example", "", 403},
		{"", "", 403},
		{"null", "", 403},
		{"http://127.0.0.1:" + port, "", 200},
		{"http://localhost:" + port, "localhost:" + port, 200},
		{"http://[::1]:" + port, "[::1]:" + port, 200},
	}
	for _, c := range cases {
		for _, route := range []struct{ method, path, body string }{{"GET", "/api/config", ""}, {"POST", "/api/feedback", `{"notes":"o"}`}} {
			req, _ := http.NewRequest(route.method, tl.hs.URL+route.path, strings.NewReader(route.body))
			req.Header.Set("X-CM-LAB-TOKEN", tl.token)
			req.Header["Origin"] = []string{c.origin} // Set would drop an empty one
			if c.host != "" {
				req.Host = c.host
			}
			seq := tl.lastSeq()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != c.status {
				t.Errorf("%s %s Origin %q Host %q: %d %s, want %d", route.method, route.path, c.origin, c.host, res.StatusCode, b, c.status)
			}
			if c.status != 200 && tl.lastSeq() != seq {
				t.Errorf("refused request appended")
			}
		}
	}
	// Two Origin headers are no origin at all.
	req, _ := http.NewRequest("GET", tl.hs.URL+"/api/config", nil)
	req.Header["Origin"] = []string{"http://127.0.0.1:" + port, "http://evil.example"}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Fatalf("two Origin headers: %d", res.StatusCode)
	}
}

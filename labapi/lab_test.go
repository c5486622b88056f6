package labapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cmlab/cmlab/events"
)

func TestConfigHealthSession(t *testing.T) {
	tl := newTestLab(t, func(o *Options) {
		o.Task = &Task{Type: "compare", ExperimentID: "exp_1"}
		o.ExitAfterSubmit = 2
	})
	r := tl.do("GET", "/api/config", "", "X-CM-LAB-TOKEN", "")
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" || r.header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("config: %d %v", r.status, r.header)
	}
	if tl.srv.LabToken() == tl.token || len(tl.srv.LabToken()) != 64 {
		t.Fatalf("Lab token %q: want 64 hex characters, not the operator token", tl.srv.LabToken())
	}
	want := `{"sessionId":"lab_test","token":"` + tl.srv.LabToken() + `","version":"test","runnerEnabled":false,"runnerAllowNetwork":false,"runnerAllowWorkflowExec":false,"allowedRoots":["` + tl.root + `"],"ui":{"blindMetricsDefault":true,"revealMetricsEnabled":true},"task":{"type":"compare","experimentId":"exp_1"},"exitAfterSubmit":2}` + "\n"
	if string(r.body) != want {
		t.Fatalf("config =\n%s\nwant\n%s", r.body, want)
	}
	r = tl.do("GET", "/api/health", "", "X-CM-LAB-TOKEN", "")
	if string(r.body) != `{"status":"ok","walIndex":0}`+"\n" {
		t.Fatalf("health = %s", r.body)
	}
	r = tl.do("GET", "/api/session", "", "X-CM-LAB-TOKEN", "")
	m := r.json(t)
	if m["sessionId"] != "lab_test" || m["walIndex"] != float64(0) || m["startedAt"] == "" {
		t.Fatalf("session = %s", r.body)
	}
}

// TestContentMachineLabFlow follows content-machine's Lab tests: missing
// store; misaligned since=1; import A and B; HEAD video and Range 0-3 →
// 206; create experiment; submit twice with one request id → same
// feedbackIds and exactly two entries in the store; poll since=0 then
// again → no duplicates.
func TestContentMachineLabFlow(t *testing.T) {
	tl := newTestLab(t)
	r := tl.do("GET", "/api/feedback?since=0", "")
	if r.status != 200 || string(r.body) != `{"items":[],"nextCursor":"0"}`+"\n" {
		t.Fatalf("missing store: %d %s", r.status, r.body)
	}
	dirA := tl.mkRun("a", map[string]string{"video.mp4": "0123456789", "script.json": `{"scenes":[]}`})
	dirB := tl.mkRun("b", map[string]string{"video.mp4": "abcdefghij", "script.json": `{}`})
	runA, runB := tl.importRun(dirA), tl.importRun(dirB)
	if runA == runB || !strings.HasPrefix(runA, "run_") {
		t.Fatalf("run ids %q %q", runA, runB)
	}
	if again := tl.importRun(dirA); again != runA {
		t.Fatalf("re-import of unchanged dir: %s, want %s", again, runA)
	}
	// A file path imports its directory.
	if again := tl.importRun(filepath.Join(dirA, "video.mp4")); again != runA {
		t.Fatalf("import by video file: %s, want %s", again, runA)
	}
	r = tl.do("GET", "/api/runs", "")
	var list struct {
		Items []map[string]any `json:"items"`
		Next  any              `json:"nextCursor"`
	}
	json.Unmarshal(r.body, &list)
	if len(list.Items) != 2 || list.Next != nil || !strings.Contains(string(r.body), `"nextCursor":null`) {
		t.Fatalf("runs list: %s", r.body)
	}
	r = tl.do("GET", "/api/runs/"+runA, "")
	if r.status != 200 || !strings.Contains(string(r.body), `"artifacts":{"reports":{"caption":false,"sync":false},"score":false,"script":true,"timestamps":false,"visuals":false}`) {
		t.Fatalf("run get: %s", r.body)
	}

	r = tl.do("HEAD", "/api/runs/"+runA+"/video", "")
	if r.status != 200 || r.header.Get("Accept-Ranges") != "bytes" || r.header.Get("Content-Type") != "video/mp4" || r.header.Get("Content-Length") != "10" || len(r.body) != 0 {
		t.Fatalf("HEAD video: %d %v %q", r.status, r.header, r.body)
	}
	r = tl.do("GET", "/api/runs/"+runA+"/video", "", "Range", "bytes=0-3")
	if r.status != 206 || string(r.body) != "0123" || r.header.Get("Content-Range") != "bytes 0-3/10" {
		t.Fatalf("Range 0-3: %d %v %q", r.status, r.header, r.body)
	}
	r = tl.do("GET", "/api/runs/"+runA+"/video", "", "Range", "bytes=20-30")
	if r.status != 416 {
		t.Fatalf("unsatisfiable range: %d", r.status)
	}
	r = tl.do("GET", "/api/runs/"+runA+"/artifact/script.json", "")
	if r.status != 200 || string(r.body) != `{"scenes":[]}`+"\n" {
		t.Fatalf("artifact: %d %s", r.status, r.body)
	}

	r = tl.do("POST", "/api/experiments", `{"name":"hook","hypothesis":"h","topic":"t","baselineRunId":"`+runA+`","variants":[{"label":"B","runId":"`+runB+`"}],"questions":[{"id":"q1","prompt":"Better?","type":"yes_no_unsure"}]}`)
	if r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	expID := r.json(t)["experimentId"].(string)
	r = tl.do("GET", "/api/experiments/"+expID, "")
	var exp events.LabExperiment
	json.Unmarshal(r.body, &exp)
	if exp.Status != "queued" || len(exp.Variants) != 1 || exp.Variants[0].RunID != runB || !strings.HasPrefix(exp.Variants[0].VariantID, "var_") || exp.CreatedAt == "" {
		t.Fatalf("experiment: %s", r.body)
	}
	varID := exp.Variants[0].VariantID
	submit := `{"winnerVariantId":"` + varID + `","reason":"better hook","answers":{"q1":"yes"},"perRun":[{"runId":"` + runA + `","variantId":"baseline","ratings":{"overall":40}},{"runId":"` + runB + `","variantId":"` + varID + `","ratings":{"overall":90},"notes":"n","tags":["x"]}]}`
	r1 := tl.do("POST", "/api/experiments/"+expID+"/submit", submit, "X-CM-LAB-REQUEST-ID", "sub-1")
	r2 := tl.do("POST", "/api/experiments/"+expID+"/submit", submit, "X-CM-LAB-REQUEST-ID", "sub-1")
	if r1.status != 200 || string(r1.body) != string(r2.body) {
		t.Fatalf("submit twice: %d %s / %d %s", r1.status, r1.body, r2.status, r2.body)
	}
	var sub struct {
		ExperimentID string   `json:"experimentId"`
		FeedbackIDs  []string `json:"feedbackIds"`
	}
	json.Unmarshal(r1.body, &sub)
	if sub.ExperimentID != expID || len(sub.FeedbackIDs) != 2 {
		t.Fatalf("submit answer: %s", r1.body)
	}
	if lines := tl.feedbackLines(); len(lines) != 2 {
		t.Fatalf("store has %d entries, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	r = tl.do("POST", "/api/experiments/"+expID+"/submit", submit, "X-CM-LAB-REQUEST-ID", "sub-2")
	if r.status != 400 || r.code() != CodeInvalidArgument || !strings.Contains(string(r.body), "Experiment already submitted") {
		t.Fatalf("second distinct submit: %d %s", r.status, r.body)
	}
	r = tl.do("GET", "/api/experiments/"+expID, "")
	json.Unmarshal(r.body, &exp)
	if exp.Status != "done" || exp.Winner == nil || exp.Winner.VariantID != varID || exp.Winner.Reason != "better hook" || string(exp.Answers) != `{"q1":"yes"}` || exp.UpdatedAt == "" {
		t.Fatalf("experiment after submit: %s", r.body)
	}

	// Poll since=0, then again from nextCursor: no duplicates.
	r = tl.do("GET", "/api/feedback?since=0", "")
	var page FeedbackPage
	json.Unmarshal(r.body, &page)
	if len(page.Items) != 2 {
		t.Fatalf("poll: %s", r.body)
	}
	for i, it := range page.Items {
		var e events.FeedbackEntry
		json.Unmarshal(it, &e)
		if e.ID != sub.FeedbackIDs[i] || e.ExperimentID != expID || e.SessionID != "lab_test" {
			t.Fatalf("item %d: %s", i, it)
		}
	}
	r = tl.do("GET", "/api/feedback?since="+page.NextCursor, "")
	if string(r.body) != `{"items":[],"nextCursor":"`+page.NextCursor+`"}`+"\n" {
		t.Fatalf("second poll: %s", r.body)
	}
	r = tl.do("GET", "/api/feedback?since=1", "")
	if r.status != 400 || r.code() != CodeInvalidCursor {
		t.Fatalf("since=1: %d %s", r.status, r.body)
	}

	// A changed fingerprint makes a new run that supersedes the old one.
	os.WriteFile(filepath.Join(dirA, "video.mp4"), []byte("0123456789-longer"), 0o600)
	r = tl.do("POST", "/api/runs/import", `{"path":"`+dirA+`"}`)
	m := r.json(t)
	if m["supersedesRunId"] != runA || m["runId"] == runA {
		t.Fatalf("changed fingerprint: %s", r.body)
	}

	// Export under lab/exports/ only.
	r = tl.do("POST", "/api/export", `{"sessionId":"lab_test"}`)
	m = r.json(t)
	if r.status != 200 || m["count"] != float64(2) || !strings.HasPrefix(m["path"].(string), tl.home.ExportsDir()) {
		t.Fatalf("export: %d %s", r.status, r.body)
	}
	b, _ := os.ReadFile(m["path"].(string))
	var doc struct {
		SchemaVersion int               `json:"schemaVersion"`
		SessionID     string            `json:"sessionId"`
		Runs          []json.RawMessage `json:"runs"`
		Experiments   []json.RawMessage `json:"experiments"`
		Feedback      []json.RawMessage `json:"feedback"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.SchemaVersion != 1 || len(doc.Runs) != 3 || len(doc.Experiments) != 1 || len(doc.Feedback) != 2 {
		t.Fatalf("export doc: %v %s", err, b)
	}
	r = tl.do("POST", "/api/export", `{"sessionId":"lab_test","path":"mine/x.json"}`)
	if r.status != 200 || r.json(t)["path"] != filepath.Join(tl.home.ExportsDir(), "mine", "x.json") {
		t.Fatalf("export relative path: %d %s", r.status, r.body)
	}
}

// TestConcurrentDuplicateRequestID: 100 concurrent POSTs with one request
// id append once and get 100 identical answers.
func TestConcurrentDuplicateRequestID(t *testing.T) {
	tl := newTestLab(t)
	before := tl.lastSeq()
	const n = 100
	bodies := make([]string, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := tl.do("POST", "/api/feedback", `{"notes":"once","ratings":{"overall":70}}`, "X-CM-LAB-REQUEST-ID", "same-id")
			bodies[i], codes[i] = string(r.body), r.status
		}()
	}
	wg.Wait()
	for i := range n {
		if codes[i] != 200 || bodies[i] != bodies[0] {
			t.Fatalf("answer %d: %d %s (first %s)", i, codes[i], bodies[i], bodies[0])
		}
	}
	if got := tl.lastSeq() - before; got != 1 {
		t.Fatalf("appended %d events, want 1", got)
	}
	if lines := tl.feedbackLines(); len(lines) != 1 {
		t.Fatalf("store has %d lines", len(lines))
	}
	// Same id, different body → 409; body requestId works like the header.
	r := tl.do("POST", "/api/feedback", `{"notes":"other"}`, "X-CM-LAB-REQUEST-ID", "same-id")
	if r.status != 409 || r.code() != CodeIdempotencyKeyReused {
		t.Fatalf("reused key: %d %s", r.status, r.body)
	}
	r = tl.do("POST", "/api/feedback", `{"requestId":"same-id","notes":"once","ratings":{"overall":70}}`)
	if r.status != 200 || string(r.body) != bodies[0] {
		t.Fatalf("body requestId: %d %s", r.status, r.body)
	}
	if got := tl.lastSeq() - before; got != 1 {
		t.Fatalf("appended %d events, want 1", got)
	}
}

// TestDedupeSurvivesRestart rebuilds the request-id map from the log.
func TestDedupeSurvivesRestart(t *testing.T) {
	tl := newTestLab(t)
	dir := tl.mkRun("a", map[string]string{"video.mp4": "x"})
	r1 := tl.do("POST", "/api/feedback", `{"notes":"n"}`, "X-CM-LAB-REQUEST-ID", "k1")
	i1 := tl.do("POST", "/api/runs/import", `{"path":"`+dir+`"}`, "X-CM-LAB-REQUEST-ID", "imp1")
	i2 := tl.do("POST", "/api/runs/import", `{"path":"`+dir+`","topic":""}`, "X-CM-LAB-REQUEST-ID", "imp2") // unchanged: idempotency.recorded
	if i1.status != 200 || string(i1.body) != string(i2.body) {
		t.Fatalf("imports: %s %s", i1.body, i2.body)
	}
	last := tl.lastSeq()
	ev, _ := tl.eng.Log().Read(last)
	if ev.Type != events.TypeIdempotencyRecorded || ev.Req != "imp2" {
		t.Fatalf("last event %s req %q", ev.Type, ev.Req)
	}
	tl.srv.Close()
	srv2, err := New(tl.srv.opts)
	if err != nil {
		t.Fatal(err)
	}
	tl.hs.Config.Handler = srv2.Handler()
	r2 := tl.do("POST", "/api/feedback", `{"notes":"n"}`, "X-CM-LAB-REQUEST-ID", "k1")
	i3 := tl.do("POST", "/api/runs/import", `{"path":"`+dir+`"}`, "X-CM-LAB-REQUEST-ID", "imp1")
	if string(r1.body) != string(r2.body) || string(i1.body) != string(i3.body) || tl.lastSeq() != last {
		t.Fatalf("after restart: %s vs %s, %s vs %s, seq %d vs %d", r1.body, r2.body, i1.body, i3.body, tl.lastSeq(), last)
	}
}

func TestExperimentValidation(t *testing.T) {
	tl := newTestLab(t)
	a := tl.importRun(tl.mkRun("a", map[string]string{"script.json": "{}"}))
	b := tl.importRun(tl.mkRun("b", map[string]string{"script.json": "{ }"}))
	c := tl.importRun(tl.mkRun("c", map[string]string{"script.json": "{  }"}))
	create := func(body string) resp { return tl.do("POST", "/api/experiments", body) }
	for _, tc := range []struct{ body, msg string }{
		{`{}`, "Missing baselineRunId"},
		{`{"baselineRunId":"` + a + `"}`, "Missing variants"},
		{`{"baselineRunId":"` + a + `","variants":"x"}`, "Missing variants"},
		{`{"baselineRunId":"` + a + `","variants":[]}`, "Missing variants"},
		{`{"baselineRunId":"` + a + `","variants":[{"label":"B"}]}`, "No valid variants provided"},
		{`{"baselineRunId":"` + a + `","variants":[{"runId":"` + b + `"}],"questions":[{"id":"q","prompt":"p","type":"scale"}]}`, "Invalid question"},
	} {
		r := create(tc.body)
		if r.status != 400 || r.code() != CodeInvalidArgument || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("create %s: %d %s, want %q", tc.body, r.status, r.body, tc.msg)
		}
	}
	// Unknown runs are 404 NOT_FOUND "Run not found" (content-machine's
	// getLabRunById), the baseline checked before the variants are read.
	for _, body := range []string{
		`{"baselineRunId":"run_nope","variants":[{"runId":"` + b + `"}]}`,
		`{"baselineRunId":"run_nope"}`,
		`{"baselineRunId":"` + a + `","variants":[{"runId":"run_nope"}]}`,
	} {
		r := create(body)
		if r.status != 404 || r.code() != CodeNotFound || !strings.Contains(string(r.body), `"Run not found: run_nope"`) {
			t.Errorf("create %s: %d %s, want 404 Run not found", body, r.status, r.body)
		}
	}
	r := create(`{"baselineRunId":"` + a + `","variants":[{"runId":"` + b + `"},{"label":"C","runId":"` + c + `"}]}`)
	expID := r.json(t)["experimentId"].(string)
	var exp events.LabExperiment
	json.Unmarshal(tl.do("GET", "/api/experiments/"+expID, "").body, &exp)
	if exp.Name != "A/B Compare" || exp.Variants[0].Label != "B" || exp.Variants[1].Label != "C" {
		t.Fatalf("defaults: %+v", exp)
	}
	vb := exp.Variants[0].VariantID
	pr := func(run, variant string) string {
		return `{"runId":"` + run + `","variantId":"` + variant + `","ratings":{"overall":50}}`
	}
	seq := tl.lastSeq()
	for _, tc := range []struct {
		body, msg string
		status    int
	}{
		{`{}`, "Missing perRun ratings", 400},
		{`{"perRun":[]}`, "Missing perRun ratings", 400},
		{`{"perRun":[{"runId":""}]}`, "No valid perRun entries provided", 400},
		{`{"perRun":[` + pr("run_other", "") + `]}`, "RunId is not part of this experiment", 400},
		{`{"perRun":[` + pr(a, "baseline") + `,` + pr(a, "baseline") + `]}`, "Duplicate perRun entry", 400},
		{`{"perRun":[` + pr(a, "baseline") + `,` + pr(b, "var_wrong") + `]}`, "VariantId does not match", 400},
		{`{"perRun":[` + pr(a, vb) + `,` + pr(b, vb) + `]}`, `Baseline perRun entry must use variantId \"baseline\"`, 400},
		{`{"perRun":[` + pr(b, vb) + `]}`, "Missing baseline perRun entry", 400},
		{`{"perRun":[` + pr(a, "baseline") + `]}`, "Missing variant perRun entry", 400},
		{`{"winnerVariantId":"var_x","perRun":[` + pr(a, "") + `,` + pr(b, "") + `]}`, "Invalid winnerVariantId", 400},
		{`{"perRun":[{"runId":"` + a + `","ratings":{"overall":101}},` + pr(b, "") + `]}`, "Rating overall must be an integer 0–100", 400},
		{`{"perRun":[` + pr(a, "") + `,` + pr(b, "") + `],"answers":[1]}`, "answers must be an object", 400},
	} {
		r := tl.do("POST", "/api/experiments/"+expID+"/submit", tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("submit %s: %d %s, want %q", tc.body, r.status, r.body, tc.msg)
		}
	}
	if tl.lastSeq() != seq {
		t.Fatalf("invalid submits appended %d events", tl.lastSeq()-seq)
	}
	r = tl.do("POST", "/api/experiments/exp_missing/submit", `{}`)
	if r.status != 404 || r.code() != CodeNotFound {
		t.Fatalf("unknown experiment: %d %s", r.status, r.body)
	}
	// Omitted variantIds are filled in; "baseline" wins.
	r = tl.do("POST", "/api/experiments/"+expID+"/submit", `{"winnerVariantId":"baseline","perRun":[`+pr(a, "")+`,`+pr(c, "")+`]}`)
	if r.status != 200 || tl.lastSeq() != seq+1 {
		t.Fatalf("valid submit: %d %s", r.status, r.body)
	}
	lines := tl.feedbackLines()
	if len(lines) != 2 || !strings.Contains(lines[0], `"variantId":"baseline"`) || !strings.Contains(lines[1], `"variantId":"`+exp.Variants[1].VariantID+`"`) {
		t.Fatalf("feedback lines: %v", lines)
	}
}

func TestImportErrorsAndRoots(t *testing.T) {
	tl := newTestLab(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "video.mp4"), []byte("v"), 0o600)
	empty := tl.mkRun("empty", nil)
	link := filepath.Join(tl.root, "link")
	os.Symlink(outside, link)
	for _, tc := range []struct{ path, code, msg string }{
		{"", CodeInvalidArgument, "Missing path"},
		{filepath.Join(tl.root, "nope"), CodeFileNotFound, "Path not found"},
		{outside, CodeForbidden, "outside allowed roots"},
		{link, CodeForbidden, "outside allowed roots"},
		{tl.root + "/../" + filepath.Base(outside), CodeFileNotFound, ""},
		{empty, CodeInvalidArgument, "No recognizable artifacts found in directory"},
	} {
		b, _ := json.Marshal(map[string]string{"path": tc.path})
		r := tl.do("POST", "/api/runs/import", string(b))
		if r.code() != tc.code || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("import %q: %d %s, want %s %q", tc.path, r.status, r.body, tc.code, tc.msg)
		}
	}
	if tl.lastSeq() != 0 {
		t.Fatalf("failed imports appended")
	}
	r := tl.do("POST", "/api/runs/import", `{"path":"`+outside+`"}`)
	if !strings.Contains(r.json(t)["error"].(map[string]any)["context"].(map[string]any)["fix"].(string), "--allow-root") {
		t.Fatalf("fix lacks --allow-root: %s", r.body)
	}
}

func TestExitAfterSubmit(t *testing.T) {
	exited := make(chan struct{})
	var tl *testLab
	tl = newTestLab(t, func(o *Options) {
		o.Task = &Task{Type: "review", RunID: "run_x"}
		o.ExitAfterSubmit = 2
		o.OnExit = func() { close(exited) }
	})
	dir := tl.mkRun("x", map[string]string{"video.mp4": "v"})
	runID := tl.importRun(dir)
	tl.srv.opts.Task.RunID = runID
	for i := range 2 {
		select {
		case <-exited:
			t.Fatalf("exited after %d submissions", i)
		default:
		}
		tl.do("POST", "/api/feedback", fmt.Sprintf(`{"runId":"%s","ratings":{"overall":%d}}`, runID, i))
	}
	select {
	case <-exited:
	default:
		t.Fatal("OnExit not called after 2 submissions")
	}
}

func TestDegradedAndReadOnly(t *testing.T) {
	tl := newTestLab(t)
	tl.srv.errFn = func() error { return fmt.Errorf("wal: log failed: fsync: no space left on device") }
	r := tl.do("POST", "/api/feedback", `{"notes":"x"}`)
	if r.status != 503 || r.code() != CodeDegraded || !strings.Contains(string(r.body), `"fix"`) {
		t.Fatalf("degraded write: %d %s", r.status, r.body)
	}
	r = tl.do("GET", "/api/health", "")
	if m := r.json(t); m["status"] != "degraded" || !strings.Contains(m["cause"].(string), "no space") {
		t.Fatalf("health: %s", r.body)
	}
	if r = tl.do("GET", "/api/feedback?since=0", ""); r.status != 200 {
		t.Fatalf("read while degraded: %d", r.status)
	}
	if r = tl.do("GET", "/metrics", ""); !strings.Contains(string(r.body), "cmlab_degraded 1") {
		t.Fatalf("metrics: %s", r.body)
	}

	ro := newTestLab(t, func(o *Options) { o.ReadOnly = true })
	r = ro.do("POST", "/api/feedback", `{"notes":"x"}`)
	if r.status != 403 || r.code() != CodeForbidden || !strings.Contains(string(r.body), "read-only") || ro.lastSeq() != 0 {
		t.Fatalf("read-only write: %d %s", r.status, r.body)
	}
}

func TestMetricsAndPanicRecovery(t *testing.T) {
	tl := newTestLab(t)
	tl.srv.route("GET /api/test-panic", authNone, func(w http.ResponseWriter, r *http.Request) error { panic("boom") })
	r := tl.do("GET", "/api/test-panic", "")
	if r.status != 500 || r.code() != CodeInternal {
		t.Fatalf("panic: %d %s", r.status, r.body)
	}
	tl.do("POST", "/api/feedback", `{"notes":"x"}`)
	r = tl.do("GET", "/metrics", "")
	for _, want := range []string{
		`cmlab_http_requests_total{code="200",route="POST /api/feedback"} 1`,
		`cmlab_http_requests_total{code="500",route="GET /api/test-panic"} 1`,
		"cmlab_wal_appends_total 1", "cmlab_wal_fsync_seconds_bucket{le=\"+Inf\"} 1",
		"cmlab_wal_group_size_count 1", "cmlab_api_append_seconds_count 1", "cmlab_sse_clients 0",
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(string(r.body))
	}
}

func TestUIAssets(t *testing.T) {
	ui := t.TempDir()
	os.WriteFile(filepath.Join(ui, "index.html"), []byte("<html>lab</html>"), 0o600)
	os.WriteFile(filepath.Join(ui, "app.js"), []byte("init();"), 0o600)
	tl := newTestLab(t, func(o *Options) { o.UIDir = ui })
	if r := tl.do("GET", "/", ""); r.status != 200 || string(r.body) != "<html>lab</html>" {
		t.Fatalf("index: %d %s", r.status, r.body)
	}
	// content-machine's layout: / and /index.html are the page, the
	// assets live under /lab/ (its index.html loads /lab/app.js).
	if r := tl.do("GET", "/index.html", ""); r.status != 200 || string(r.body) != "<html>lab</html>" || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("index.html: %d %v %s", r.status, r.header, r.body)
	}
	if r := tl.do("GET", "/lab/app.js", ""); r.status != 200 || string(r.body) != "init();" ||
		r.header.Get("Content-Type") != "application/javascript; charset=utf-8" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("lab/app.js: %d %v %s", r.status, r.header, r.body)
	}
	os.Symlink("/etc/passwd", filepath.Join(ui, "passwd"))
	// Misses outside /api/ are content-machine's plain-text 404 (no
	// Content-Type); misses under /api/ keep the JSON envelope.
	for _, p := range []string{"/app.js", "/lab/..%2Fsecret", "/lab/.hidden", "/lab/nope.js", "/lab/", "/lab/passwd", "/nope.js", "/lab"} {
		if r := tl.do("GET", p, ""); r.status != 404 || string(r.body) != "Not found" || r.header.Get("Content-Type") != "" {
			t.Fatalf("%s: %d %v %s", p, r.status, r.header, r.body)
		}
	}
	if r := tl.do("GET", "/api/nope", ""); r.status != 404 || r.code() != CodeNotFound {
		t.Fatalf("/api/nope: %d %s", r.status, r.body)
	}
}

func TestExportRequestID(t *testing.T) {
	tl := newTestLab(t)
	tl.do("POST", "/api/feedback", `{"notes":"x"}`)
	r1 := tl.do("POST", "/api/export", `{"sessionId":"lab_test"}`, "X-CM-LAB-REQUEST-ID", "ex1")
	seq := tl.lastSeq()
	r2 := tl.do("POST", "/api/export", `{"sessionId":"lab_test"}`, "X-CM-LAB-REQUEST-ID", "ex1")
	if r1.status != 200 || string(r1.body) != string(r2.body) || tl.lastSeq() != seq {
		t.Fatalf("export retry: %s / %s, seq %d → %d", r1.body, r2.body, seq, tl.lastSeq())
	}
	ents, _ := os.ReadDir(tl.home.ExportsDir())
	if len(ents) != 1 {
		t.Fatalf("%d export files, want 1", len(ents))
	}
}

// TestPollSessionFilterAndLimitOverHTTP: entries of two sessions; polling
// one session with limit=1 twice returns its two entries, one per poll,
// and the cursor then reaches the end.
func TestPollSessionFilterAndLimitOverHTTP(t *testing.T) {
	tl := newTestLab(t)
	opts := tl.srv.opts
	opts.SessionID = "lab_other"
	other, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	oc := NewLocalClient(other.Handler(), tl.token)
	ctx := t.Context()
	var mine []string
	for i, sess := range []string{"mine", "other", "mine", "other"} {
		body := fmt.Sprintf(`{"notes":"n%d"}`, i)
		if sess == "other" {
			if err := oc.Do(ctx, "POST", "/api/feedback", "", json.RawMessage(body), nil); err != nil {
				t.Fatal(err)
			}
			continue
		}
		r := tl.do("POST", "/api/feedback", body)
		mine = append(mine, r.json(t)["feedbackId"].(string))
	}
	var got []string
	cur := "0"
	for range 2 {
		var page FeedbackPage
		json.Unmarshal(tl.do("GET", "/api/feedback?sessionId=lab_test&limit=1&since="+cur, "").body, &page)
		if len(page.Items) != 1 {
			t.Fatalf("page from %s: %d items", cur, len(page.Items))
		}
		var e struct{ ID string }
		json.Unmarshal(page.Items[0], &e)
		got = append(got, e.ID)
		cur = page.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(mine, ",") {
		t.Fatalf("got %v, want %v", got, mine)
	}
	var last FeedbackPage
	json.Unmarshal(tl.do("GET", "/api/feedback?sessionId=lab_test&limit=1&since="+cur, "").body, &last)
	fi, _ := os.Stat(tl.home.FeedbackFile())
	if len(last.Items) != 0 || last.NextCursor != fmt.Sprint(fi.Size()) {
		t.Fatalf("third poll: %+v, file %d bytes", last, fi.Size())
	}
}

// TestSameOriginAndBearer: the Lab page's own origin, localhost and a
// Bearer token are accepted.
func TestSameOriginAndBearer(t *testing.T) {
	tl := newTestLab(t)
	port := tl.hs.URL[strings.LastIndex(tl.hs.URL, ":")+1:]
	for _, hdr := range [][]string{
		{"Origin", tl.hs.URL},
		{"Origin", "http://localhost:" + port, "Host", "localhost:" + port},
		{"X-CM-LAB-TOKEN", "", "Authorization", "Bearer " + tl.token},
		{"Host", "localhost:" + port},
	} {
		if r := tl.do("POST", "/api/feedback", `{"notes":"ok"}`, hdr...); r.status != 200 {
			t.Fatalf("%v: %d %s", hdr, r.status, r.body)
		}
	}
	if got := tl.lastSeq(); got != 4 {
		t.Fatalf("seq %d, want 4", got)
	}
}

package labapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

type runsPage struct {
	Items []struct {
		RunID         string `json:"runId"`
		Topic         string `json:"topic"`
		FeedbackCount int    `json:"feedbackCount"`
	} `json:"items"`
	NextCursor *string `json:"nextCursor"`
	Total      int     `json:"total"`
}

func (tl *testLab) runsPage(query string) runsPage {
	tl.t.Helper()
	r := tl.do("GET", "/api/runs?"+query, "")
	if r.status != 200 {
		tl.t.Fatalf("GET /api/runs?%s: %d %s", query, r.status, r.body)
	}
	var p runsPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		tl.t.Fatal(err)
	}
	return p
}

func topics(p runsPage) string {
	var s []string
	for _, it := range p.Items {
		s = append(s, it.Topic)
	}
	return strings.Join(s, ",")
}

// TestRunsPaging: the paging extension walks every run once, in order,
// even while runs are imported between pages; q, sort and unrated filter
// and order; bad parameters are INVALID_ARGUMENT/INVALID_CURSOR; and the
// answer without them is content-machine's (no total, no feedbackCount,
// nextCursor null).
func TestRunsPaging(t *testing.T) {
	tl := newTestLab(t)
	var ids []string
	for i := range 7 {
		d := tl.mkRun(fmt.Sprintf("r%d", i), map[string]string{"script.json": fmt.Sprintf(`{"meta":{"topic":"topic %d"}}`, i)})
		ids = append(ids, tl.importRun(d))
	}
	plain := tl.do("GET", "/api/runs", "")
	if strings.Contains(string(plain.body), "total") || strings.Contains(string(plain.body), "feedbackCount") || !strings.HasSuffix(string(plain.body), `"nextCursor":null}`+"\n") {
		t.Fatalf("GET /api/runs without paging changed: %s", plain.body)
	}
	p1 := tl.runsPage("limit=3")
	if topics(p1) != "topic 6,topic 5,topic 4" || p1.Total != 7 || p1.NextCursor == nil || *p1.NextCursor != ids[4] {
		t.Fatalf("page 1: %s total %d next %v", topics(p1), p1.Total, p1.NextCursor)
	}
	// A run imported between pages goes on top: the next page neither
	// repeats nor skips.
	tl.importRun(tl.mkRun("r7", map[string]string{"script.json": `{"meta":{"topic":"topic 7"}}`}))
	p2 := tl.runsPage("limit=3&after=" + *p1.NextCursor)
	if topics(p2) != "topic 3,topic 2,topic 1" || p2.Total != 8 {
		t.Fatalf("page 2: %s total %d", topics(p2), p2.Total)
	}
	p3 := tl.runsPage("limit=3&after=" + *p2.NextCursor)
	if topics(p3) != "topic 0" || p3.NextCursor != nil {
		t.Fatalf("page 3: %s next %v", topics(p3), p3.NextCursor)
	}
	if p := tl.runsPage("q=TOPIC%203"); topics(p) != "topic 3" || p.Total != 1 {
		t.Fatalf("q: %s", topics(p))
	}
	if p := tl.runsPage("sort=oldest&limit=2"); topics(p) != "topic 0,topic 1" {
		t.Fatalf("oldest: %s", topics(p))
	}
	// Feedback on two runs: counted, and unrated leaves them out.
	for _, id := range []string{ids[6], ids[6], ids[2]} {
		if r := tl.do("POST", "/api/feedback", `{"runId":"`+id+`","ratings":{"overall":70}}`); r.status != 200 {
			t.Fatalf("feedback: %d %s", r.status, r.body)
		}
	}
	if p := tl.runsPage("limit=2&sort=oldest&q=topic%206"); len(p.Items) != 1 || p.Items[0].FeedbackCount != 2 {
		t.Fatalf("feedbackCount: %+v", p.Items)
	}
	if p := tl.runsPage("unrated=1&sort=oldest"); topics(p) != "topic 0,topic 1,topic 3,topic 4,topic 5,topic 7" || p.Total != 6 {
		t.Fatalf("unrated: %s", topics(p))
	}
	for q, code := range map[string]string{"limit=0": CodeInvalidArgument, "limit=x": CodeInvalidArgument, "sort=size": CodeInvalidArgument,
		"unrated=maybe": CodeInvalidArgument, "after=run_nope": CodeInvalidCursor} {
		if r := tl.do("GET", "/api/runs?"+q, ""); r.status != 400 || r.code() != code {
			t.Errorf("GET /api/runs?%s = %d %s, want 400 %s", q, r.status, r.body, code)
		}
	}
	if p := tl.runsPage("limit=100000"); len(p.Items) != 8 {
		t.Fatalf("limit over 500: %d items", len(p.Items))
	}
}

// TestExperimentsPaging: the same extension on GET /api/experiments.
func TestExperimentsPaging(t *testing.T) {
	tl := newTestLab(t)
	a := tl.importRun(tl.mkRun("a", map[string]string{"script.json": `{}`}))
	b := tl.importRun(tl.mkRun("b", map[string]string{"script.json": `{}`}))
	for i := range 3 {
		body := fmt.Sprintf(`{"name":"exp %d","baselineRunId":%q,"variants":[{"label":"B","runId":%q}]}`, i, a, b)
		if r := tl.do("POST", "/api/experiments", body); r.status != 200 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	var p struct {
		Items []struct {
			Name     string `json:"name"`
			RunCount int    `json:"runCount"`
		} `json:"items"`
		NextCursor *string `json:"nextCursor"`
		Total      int     `json:"total"`
	}
	r := tl.do("GET", "/api/experiments?limit=2&sort=name", "")
	json.Unmarshal(r.body, &p)
	if r.status != 200 || len(p.Items) != 2 || p.Items[0].Name != "exp 0" || p.Items[1].RunCount != 2 || p.Total != 3 || p.NextCursor == nil {
		t.Fatalf("experiments page: %d %s", r.status, r.body)
	}
	if r := tl.do("GET", "/api/experiments?unrated=1", ""); r.status != 400 {
		t.Fatalf("unrated on experiments: %d", r.status)
	}
	if r := tl.do("GET", "/api/experiments", ""); strings.Contains(string(r.body), "total") {
		t.Fatalf("plain experiments list changed: %s", r.body)
	}
}

// TestRunFeedbackRoute: GET /api/runs/{runId}/feedback is the run's latest
// entries, newest first, with the total; it follows lines other programs
// append and a feedback file that was replaced.
func TestRunFeedbackRoute(t *testing.T) {
	tl := newTestLab(t)
	a := tl.importRun(tl.mkRun("a", map[string]string{"script.json": `{}`}))
	b := tl.importRun(tl.mkRun("b", map[string]string{"script.json": `{}`}))
	type page struct {
		Items []struct {
			RunID string `json:"runId"`
			Notes string `json:"notes"`
		} `json:"items"`
		Total int `json:"total"`
	}
	get := func(id string) page {
		t.Helper()
		r := tl.do("GET", "/api/runs/"+id+"/feedback", "")
		var p page
		if r.status != 200 || json.Unmarshal(r.body, &p) != nil {
			t.Fatalf("GET feedback of %s: %d %s", id, r.status, r.body)
		}
		return p
	}
	if p := get(a); p.Total != 0 || len(p.Items) != 0 {
		t.Fatalf("empty: %+v", p)
	}
	for i := range 23 {
		if r := tl.do("POST", "/api/feedback", fmt.Sprintf(`{"runId":%q,"notes":"n%d"}`, a, i)); r.status != 200 {
			t.Fatal(r.status)
		}
	}
	tl.do("POST", "/api/feedback", fmt.Sprintf(`{"runId":%q,"notes":"other"}`, b))
	p := get(a)
	if p.Total != 23 || len(p.Items) != 20 || p.Items[0].Notes != "n22" || p.Items[19].Notes != "n3" {
		t.Fatalf("latest of a: total %d, %d items, first %+v", p.Total, len(p.Items), p.Items[0])
	}
	if p := get(b); p.Total != 1 || p.Items[0].Notes != "other" {
		t.Fatalf("b: %+v", p)
	}
	if r := tl.do("GET", "/api/runs/run_nope/feedback", ""); r.status != 404 {
		t.Fatalf("unknown run: %d", r.status)
	}
	// The file replaced by a shorter one (as a rebuild would): scanned again.
	f := tl.home.FeedbackFile()
	lines := tl.feedbackLines()
	tmp := f + ".new"
	if err := os.WriteFile(tmp, []byte(lines[len(lines)-1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	if p := get(a); p.Total != 0 {
		t.Fatalf("after the file was replaced: %+v", p)
	}
	if p := get(b); p.Total != 1 {
		t.Fatalf("b after the file was replaced: %+v", p)
	}
}

// TestExportDownload: the file POST /api/export wrote downloads as an
// attachment; other names, paths and symlinks do not.
func TestExportDownload(t *testing.T) {
	tl := newTestLab(t, func(o *Options) { o.SessionID = "lab_dl" })
	if err := tl.srv.Start(t.Context(), os.Getpid(), "test"); err != nil {
		t.Fatal(err)
	}
	r := tl.do("POST", "/api/export", `{"sessionId":"lab_dl"}`)
	if r.status != 200 {
		t.Fatalf("export: %d %s", r.status, r.body)
	}
	path := r.json(t)["path"].(string)
	want, _ := os.ReadFile(path)
	d := tl.do("GET", "/api/exports/"+filepath.Base(path), "", "X-CM-LAB-TOKEN", "")
	if d.status != 200 || string(d.body) != string(want) || d.header.Get("Content-Disposition") != `attachment; filename="`+filepath.Base(path)+`"` ||
		d.header.Get("Content-Type") != "application/json; charset=utf-8" || d.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("download: %d %v %q", d.status, d.header, d.body)
	}
	if err := os.Symlink(path, filepath.Join(filepath.Dir(path), "link.json")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"link.json", "nope.json", "..%2Fstate%2Ftoken", ".hidden.json", "x.txt"} {
		if r := tl.do("GET", "/api/exports/"+n, ""); r.status != 404 {
			t.Errorf("GET /api/exports/%s = %d %s", n, r.status, r.body)
		}
	}
}

// TestTopRunID: the fast path reads the top-level runId or says to decode.
func TestTopRunID(t *testing.T) {
	for _, c := range []struct {
		line string
		id   string
		ok   bool
	}{
		{`{"schemaVersion":1,"id":"fb_1","runId":"run_a","ratings":{"overall":1}}` + "\n", "run_a", true},
		{`{"runId" : "run_b"}`, "run_b", true},
		{`{"notes":"no run"}`, "", true},
		{`{"extra":{"runId":"nested"},"runId":"run_c"}`, "", false},
		{`{"runId":null}`, "", false},
		{`{"runId":"a\"b"}`, "", false},
		{`{"notes":"\"runId\": \"fake\"","runId":"run_d"}`, "run_d", true},
	} {
		id, ok := topRunID([]byte(c.line))
		if id != c.id || ok != c.ok {
			t.Errorf("topRunID(%s) = %q %v, want %q %v", c.line, id, ok, c.id, c.ok)
		}
	}
}

// BenchmarkRunsPage10k: the server's cost of the Lab's first request, one
// page of the runs list, in a home of 10,000 runs (with and without the
// paging extension's search). go test ./labapi -bench RunsPage10k -run ^$
func BenchmarkRunsPage10k(b *testing.B) {
	eng, err := engine.Open(context.Background(), engine.Options{Home: home.Home{Dir: filepath.Join(b.TempDir(), "home")}})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	srv, err := New(withReadModels(b, Options{Engine: eng, Listen: "127.0.0.1:0", SessionID: "lab_bench", Version: "test"}))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	seq := eng.Log().LastSeq()
	for i := range 10_000 {
		sync := i % 101
		ev, err := events.New("lab_bench", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: fmt.Sprintf("run_b_%05d", i),
			SessionID: "lab_bench", CreatedAt: fmt.Sprintf("2026-01-01T00:%02d:%02d.000Z", i/60%60, i%60), Topic: fmt.Sprintf("topic %05d", i),
			ArtifactsDir: "/nonexistent", ArtifactsDirRealpath: fmt.Sprintf("/nonexistent/%d", i), AutoMetricsSummary: &events.AutoMetricsSummary{SyncRating: &sync}}})
		if err != nil {
			b.Fatal(err)
		}
		seq++
		ev.Seq = seq
		srv.lab.Observe(ev)
	}
	for _, q := range []string{"limit=50", "limit=50&q=topic%2009", "limit=50&sort=sync"} {
		b.Run(q, func(b *testing.B) {
			h := srv.Handler()
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/api/runs?"+q, nil)
				req.Host = "127.0.0.1"
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

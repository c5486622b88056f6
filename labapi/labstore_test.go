package labapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// fullReplay is the heap model before the store (labstore_ref_test.go)
// built from the whole log.
func fullReplay(t testing.TB, eng *engine.Engine) *refLabState {
	t.Helper()
	st := newRefLabState()
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		st.Observe(ev)
	}
	return st
}

// get answers GET path from srv: status and body.
func get(t testing.TB, srv *Server, path string) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "127.0.0.1"
	srv.Handler().ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, b
}

// sameLabState: the store of srv answers every list, page and record
// exactly as the heap model want does.
func sameLabState(t testing.TB, srv *Server, want *refLabState) {
	t.Helper()
	if code, got := get(t, srv, "/api/runs"); code != 200 || !bytes.Equal(got, refRunsList(want)) {
		t.Fatalf("GET /api/runs: %d\n got %.600s\nwant %.600s", code, got, refRunsList(want))
	}
	if code, got := get(t, srv, "/api/experiments"); code != 200 || !bytes.Equal(got, refExperimentsList(want)) {
		t.Fatalf("GET /api/experiments: %d\n got %.600s\nwant %.600s", code, got, refExperimentsList(want))
	}
	for _, run := range want.runList() {
		got, ok, err := srv.lab.run(run.RunID)
		if err != nil || !ok || !reflect.DeepEqual(got, run) {
			t.Fatalf("run %s: %+v %v %v, want %+v", run.RunID, got, ok, err, run)
		}
	}
	for real, id := range want.byReal {
		got, ok, err := srv.lab.runByRealpath(real)
		if real == "" {
			continue // no key in the store (lsKeyOK)
		}
		if err != nil || !ok || got.RunID != id {
			t.Fatalf("run by %q: %s %v %v, want %s", real, got.RunID, ok, err, id)
		}
	}
	for _, e := range want.experimentList() {
		got, ok, err := srv.lab.experiment(e.ExperimentID)
		if err != nil || !ok || !reflect.DeepEqual(got, e) {
			t.Fatalf("experiment %s: %+v %v %v, want %+v", e.ExperimentID, got, ok, err, e)
		}
	}
	var gotOrder, wantOrder []string
	if err := srv.lab.eachExperimentByAppearance(func(e *events.LabExperiment) bool {
		gotOrder = append(gotOrder, e.ExperimentID+"/"+e.Status)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for _, e := range want.experimentsByFirstAppearance() {
		wantOrder = append(wantOrder, e.ExperimentID+"/"+e.Status)
	}
	if fmt.Sprint(gotOrder) != fmt.Sprint(wantOrder) {
		t.Fatalf("experiments by first appearance:\n got %v\nwant %v", gotOrder, wantOrder)
	}
	for id, ts := range want.sessions {
		got, ok, err := srv.lab.sessionStarted(id)
		if err != nil || !ok || got != ts {
			t.Fatalf("session %s: %d %v %v, want %d", id, got, ok, err, ts)
		}
	}
}

// samePages: every page of every sort and filter, walked by nextCursor,
// equals the heap model's.
func samePages(t testing.TB, srv *Server, want *refLabState) {
	t.Helper()
	counts, err := srv.fbIndex.counts()
	if err != nil {
		t.Fatal(err)
	}
	type route struct {
		path  string
		sorts []string
		ref   func(lq listQuery) []byte
	}
	for _, r := range []route{
		{"/api/runs", runSorts, func(lq listQuery) []byte { return refRunsPage(want, lq, counts) }},
		{"/api/experiments", experimentSorts, func(lq listQuery) []byte { return refExperimentsPage(want, lq) }},
	} {
		for _, sort := range r.sorts {
			for _, filter := range []string{"", "q=1", "q=RUN_1", "unrated=1"} {
				if filter == "unrated=1" && r.path != "/api/runs" {
					continue
				}
				for _, limit := range []int{23, 500} {
					v, _ := url.ParseQuery(filter)
					v.Set("sort", sort)
					v.Set("limit", fmt.Sprint(limit))
					lq, _, err := parseListQuery(v, r.sorts...)
					if err != nil {
						t.Fatal(err)
					}
					for pages := 0; ; pages++ {
						code, got := get(t, srv, r.path+"?"+v.Encode())
						if w := r.ref(lq); code != 200 || !bytes.Equal(got, w) {
							t.Fatalf("GET %s?%s: %d\n got %.800s\nwant %.800s", r.path, v.Encode(), code, got, w)
						}
						var next struct{ NextCursor *string }
						jsonUnmarshal(t, got, &next)
						if next.NextCursor == nil || pages > 2000 {
							break
						}
						v.Set("after", *next.NextCursor)
						lq.after = *next.NextCursor
					}
				}
			}
		}
		v := url.Values{"after": {"run_nope"}}
		if code, body := get(t, srv, r.path+"?"+v.Encode()); code != 400 || !bytes.Contains(body, []byte(CodeInvalidCursor)) {
			t.Fatalf("unknown cursor: %d %s", code, body)
		}
	}
}

// labEdgeEvents are lab events the mixed workload lacks: a run with no
// createdAt (filled from ts), a run re-imported under its id with another
// createdAt, createdAt ties, a NUL and a prefix in createdAt, an
// experiment replaced, sessions restarted.
func labEdgeEvents() []*events.Event {
	run := func(id, created, topic string) *events.Event {
		return events.MustNew("lab_e", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: id, SessionID: "lab_e",
			CreatedAt: created, Topic: topic, ArtifactsDir: "/edge/" + id, ArtifactsDirRealpath: "/edge/real"}})
	}
	exp := func(id, created, name string) events.LabExperiment {
		return events.LabExperiment{SchemaVersion: 1, ExperimentID: id, SessionID: "lab_e", CreatedAt: created, Name: name,
			BaselineRunID: "run_edge_a", Variants: []events.Variant{{VariantID: "v", Label: "B", RunID: "run_edge_b"}}, Status: "queued"}
	}
	e1 := exp("exp_edge_1", "", "Zeta")
	e1b := e1
	e1b.CreatedAt, e1b.Status = "2026-03-01T00:00:00.000Z", "done"
	return []*events.Event{
		run("run_edge_a", "", "Alpha"),
		run("run_edge_b", "2026-03-01T00:00:00.000Z", "beta"),
		run("run_edge_c", "2026-03-01T00:00:00.000Z", ""),
		run("run_edge_d", "2026-03-01T00:00:00.000Z\x00x", "nul"),
		run("run_edge_e", "2026-03-01T00:00:00.000", "prefix"),
		run("run_edge_b", "2025-01-01T00:00:00.000Z", "beta again"),
		events.MustNew("lab_e", &events.ExperimentCreated{Experiment: e1}),
		events.MustNew("lab_e", &events.ExperimentCreated{Experiment: exp("exp_edge_2", "2026-03-01T00:00:00.000Z", "alpha")}),
		events.MustNew("lab_e", &events.ExperimentSubmitted{Experiment: e1b}),
		events.MustNew("lab_e", &events.LabSessionStarted{SessionID: "lab_e", Version: "t"}),
		events.MustNew("lab_e", &events.LabSessionStarted{SessionID: "lab_e", Version: "t2"}),
	}
}

// writeLog appends evs to the log of h directly (no engine, no fsync):
// the homes of these tests are built fast, as `cmlab bench` builds its.
func writeLog(t testing.TB, h home.Home, evs iter.Seq[*events.Event]) {
	t.Helper()
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var batch []*events.Event
	flush := func() {
		if len(batch) > 0 {
			if _, err := l.Append(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for ev := range evs {
		if batch = append(batch, ev); len(batch) == 4096 {
			flush()
		}
	}
	flush()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// mixedLab is the mixed Lab workload of n events, then labEdgeEvents.
func mixedLab(seed uint64, n int) iter.Seq[*events.Event] {
	return func(yield func(*events.Event) bool) {
		for ev := range projections.Workload(projections.WorkloadMixedLab, seed, n) {
			if !yield(ev) {
				return
			}
		}
		for _, ev := range labEdgeEvents() {
			if !yield(ev) {
				return
			}
		}
	}
}

// TestLabStoreParity: the store answers every list, page and record of a
// mixed history byte for byte as the heap model did, on the first start
// (the store built from the log), after live appends (pending changes,
// then flushed) and after a restart (the store reopened, not rebuilt).
func TestLabStoreParity(t *testing.T) {
	h := home.Home{Dir: t.TempDir() + "/home"}
	writeLog(t, h, mixedLab(7, 3000))
	srv, eng := openServer(t, h, nil)
	want := fullReplay(t, eng)
	if len(want.runs) < 100 || len(want.exps) < 100 {
		t.Fatalf("workload too small: %d runs, %d experiments", len(want.runs), len(want.exps))
	}
	sameLabState(t, srv, want)
	samePages(t, srv, want)

	// Live: appended through the engine, read before and after a flush.
	for ev := range projections.Workload(projections.WorkloadMixedLab, 8, 300) {
		if _, err := eng.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	want = fullReplay(t, eng)
	for _, run := range want.runList()[:20] {
		if got, ok, err := srv.lab.run(run.RunID); err != nil || !ok || got.CreatedAt != run.CreatedAt {
			t.Fatalf("pending run %s: %v %v", run.RunID, ok, err)
		}
	}
	sameLabState(t, srv, want)
	samePages(t, srv, want)
	srv.Close()
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	srv, eng = openServer(t, h, nil)
	defer eng.Close()
	defer srv.Close()
	if why := srv.lab.Rebuilt(); why != "" {
		t.Fatalf("store rebuilt after a clean stop: %s", why)
	}
	if c := srv.lab.DurableCovered(); c != eng.Log().LastSeq() {
		t.Fatalf("store covers %d after a clean stop, the log ends at %d", c, eng.Log().LastSeq())
	}
	sameLabState(t, srv, fullReplay(t, eng))
}

func jsonUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %.300s", err, b)
	}
}

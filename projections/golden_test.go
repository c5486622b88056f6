package projections

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// workloadSrc numbers n workload events 1..n as the log would.
func workloadSrc(kind int, seed uint64, n int) func(yield func(*events.Event, error) bool) {
	return func(yield func(*events.Event, error) bool) {
		seq := uint64(0)
		for ev := range Workload(kind, seed, n) {
			seq++
			ev.Seq = seq
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// workloadEvents is workloadSrc's events as a slice.
func workloadEvents(kind int, seed uint64, n int) []*events.Event {
	var evs []*events.Event
	for ev := range workloadSrc(kind, seed, n) {
		evs = append(evs, ev)
	}
	return evs
}

func rebuildInto(t *testing.T, src func(yield func(*events.Event, error) bool), opts RebuildOptions) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	if _, err := Rebuild(context.Background(), src, h, opts); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestGoldenViews: the same events give the same bytes, across runs and
// releases. testdata/golden holds every view of a 400-event workload of
// every type; run with -update after an intended format change.
func TestGoldenViews(t *testing.T) {
	h := rebuildInto(t, workloadSrc(WorkloadEveryType, 7, 400), RebuildOptions{NoSync: true})
	golden := home.Home{Dir: filepath.Join("testdata", "golden")}
	if *update {
		os.RemoveAll(golden.Dir)
		views, err := ViewFiles(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			b, err := os.ReadFile(filepath.Join(h.Dir, v))
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(golden.Dir, filepath.FromSlash(v))
			os.MkdirAll(filepath.Dir(dst), 0o755)
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	d, err := Compare(golden, h)
	if err != nil {
		t.Fatal(err)
	}
	if d != nil {
		t.Fatalf("views differ from testdata/golden: %s", d)
	}
	views, _ := ViewFiles(golden)
	for _, want := range []string{FeedbackView, RunsView, ExperimentsView, StepsView,
		SessionEventsView("lab_s0"), SessionIdempotencyView("lab_s0"),
		PtyEventsView("conv_a"), PtyBlocksView("conv_a"), PtySpoolView("conv_a")} {
		if !slices.Contains(views, want) {
			t.Errorf("golden set lacks %s", want)
		}
	}
	for _, v := range views {
		if strings.Contains(v, "..") || strings.Contains(v, " ") {
			t.Errorf("view %q built from an invalid id", v)
		}
	}
}

// Rebuilding twice, with the live (non-exclusive, flushed per batch) and
// the rebuild (exclusive) write paths, gives the same bytes.
func TestLiveAndRebuildPathsAgree(t *testing.T) {
	a := rebuildInto(t, workloadSrc(WorkloadEveryType, 9, 3000), RebuildOptions{NoSync: true})
	b := home.Home{Dir: t.TempDir()}
	p := New(b)
	applyBatches(t, p, workloadEvents(WorkloadEveryType, 9, 3000), 3)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := Compare(a, b); err != nil || d != nil {
		t.Fatalf("paths disagree: %v %v", d, err)
	}
}

func TestFeedbackLineShape(t *testing.T) {
	overall := 80
	ev := events.MustNew("lab_x", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: "fb_1", SessionID: "lab_x", RunID: "run_1",
		Ratings: &events.Ratings{Overall: &overall}, Notes: "a <b> & c", Tags: []string{"t"}}})
	ev.Seq, ev.TS, ev.ID = 1, 1770379200123, "id1"
	ev.WithRequest("req-1", "sha256-x", []byte(`{"feedbackId":"fb_1"}`))
	h := rebuildInto(t, func(yield func(*events.Event, error) bool) { yield(ev, nil) }, RebuildOptions{NoSync: true})
	for _, c := range []struct{ view, want string }{
		{FeedbackView, `{"schemaVersion":1,"id":"fb_1","createdAt":"2026-02-06T12:00:00.123Z","sessionId":"lab_x","runId":"run_1","ratings":{"overall":80},"notes":"a <b> & c","tags":["t"]}` + "\n"},
		{SessionIdempotencyView("lab_x"), `{"requestId":"req-1","type":"feedback","entityId":"fb_1","createdAt":"2026-02-06T12:00:00.123Z","response":{"feedbackId":"fb_1"}}` + "\n"},
	} {
		got, err := os.ReadFile(filepath.Join(h.Dir, c.view))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, []byte(c.want)) {
			t.Errorf("%s:\n got %s\nwant %s", c.view, got, c.want)
		}
	}
}

// With few open files allowed, eviction (flush, fsync, close, reopen at the
// known end) changes no byte.
func TestEvictionKeepsBytes(t *testing.T) {
	a := rebuildInto(t, workloadSrc(WorkloadEveryType, 13, 2000), RebuildOptions{NoSync: true})
	b := home.Home{Dir: t.TempDir()}
	p, err := Open(Options{Home: b, Fresh: true, MaxOpenFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	applyBatches(t, p, workloadEvents(WorkloadEveryType, 13, 2000), 1)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := Compare(a, b); err != nil || d != nil {
		t.Fatalf("eviction changed bytes: %v %v", d, err)
	}
}

// An event that cannot be decoded (a newer version, garbage payload)
// projects nothing, is counted, and the following events still project.
func TestUndecodableEventsSkipped(t *testing.T) {
	good := events.MustNew("lab_x", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: "run_1"}})
	future := events.MustNew("lab_x", &events.RunImported{Run: events.LabRun{RunID: "run_future"}})
	future.V = 99
	garbage := events.MustNew("lab_x", &events.FeedbackSubmitted{})
	garbage.Data = []byte{0xc1, 0xff, 0x00}
	unknown := &events.Event{V: 1, ID: "u", Type: "no.such.type", Stream: "lab_x", Data: []byte{0x80}}
	evs := []*events.Event{future, garbage, unknown, good}
	for i, ev := range evs {
		ev.Seq, ev.TS = uint64(i+1), 1770379200000
	}
	h := home.Home{Dir: t.TempDir()}
	res, err := Rebuild(context.Background(), func(yield func(*events.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}, h, RebuildOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 2 || res.Events != 4 {
		t.Fatalf("skipped %d of %d, want 2 of 4 (unknown types project nothing but are not errors)", res.Skipped, res.Events)
	}
	runs, _ := os.ReadFile(filepath.Join(h.Dir, RunsView))
	if bytes.Count(runs, []byte("\n")) != 1 || !bytes.Contains(runs, []byte(`"runId":"run_1"`)) {
		t.Fatalf("runs.jsonl = %s", runs)
	}
}

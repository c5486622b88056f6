package engine

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

func feedbackEvent(id string) *events.Event {
	overall := 70
	return events.MustNew("lab_s1", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: id, SessionID: "lab_s1", Ratings: &events.Ratings{Overall: &overall}}})
}

// ingested lists the raw lines of the log's feedback.ingested events, in order.
func ingested(t *testing.T, h home.Home) []string {
	t.Helper()
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == events.TypeFeedbackIngested {
			p, err := events.DecodeAs[*events.FeedbackIngested](ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(p.Raw))
		}
	}
	return out
}

func TestLegacyFeedbackLines(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e, err := Open(ctx, Options{Home: h, FeedbackWait: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, feedbackEvent("fb_1"))

	// A legacy writer appends two complete lines and starts a third.
	appendBytes(t, h, projections.FeedbackView, "{\"id\":\"cm_1\"}\n{\"id\":\"cm_2\",\"note\":\"ü\"}\n{\"id\":\"cm_")
	before, _ := os.ReadFile(viewPath(h, projections.FeedbackView))

	// Our next write cannot go after an unfinished line: it waits, then
	// fails with BUSY, appending and changing nothing.
	_, err = e.Append(ctx, feedbackEvent("fb_2"))
	if !errors.Is(err, ErrFeedbackBusy) {
		t.Fatalf("append behind a partial foreign line: %v, want ErrFeedbackBusy", err)
	}
	after, _ := os.ReadFile(viewPath(h, projections.FeedbackView))
	if string(after) != string(before) {
		t.Fatalf("feedback.jsonl changed while busy:\n%q\n%q", before, after)
	}
	if got := ingested(t, h); len(got) != 0 {
		t.Fatalf("ingested %q while the append failed", got)
	}
	// Non-feedback appends are not held up.
	mustAppend(t, e, events.MustNew("lab_s1", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: "run_1"}}))

	// The writer finishes its line while our append waits: it goes through.
	done := make(chan error, 1)
	go func() { _, err := e.Append(ctx, feedbackEvent("fb_2")); done <- err }()
	time.Sleep(20 * time.Millisecond)
	appendBytes(t, h, projections.FeedbackView, "3\"}\n")
	if err := <-done; err != nil {
		t.Fatalf("append after the foreign line completed: %v", err)
	}
	want := []string{`{"id":"cm_1"}`, `{"id":"cm_2","note":"ü"}`, `{"id":"cm_3"}`}
	if got := ingested(t, h); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("ingested %q, want %q", got, want)
	}
	fb := string(readView(t, h, projections.FeedbackView))
	if !strings.HasSuffix(fb, "{\"id\":\"cm_3\"}\n{\"schemaVersion\":1,\"id\":\"fb_2\",\"createdAt\":") {
		if i := strings.Index(fb, "cm_3"); i < 0 || !strings.Contains(fb[i:], `"id":"fb_2"`) {
			t.Fatalf("fb_2 not written after the foreign lines:\n%s", fb)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rebuildAndCompare(t, h)

	// While the daemon is down: two complete lines and a partial one.
	appendBytes(t, h, projections.FeedbackView, "{\"id\":\"cm_4\"}\n{\"id\":\"cm_5\"}\n{\"id\":\"cm_6\"")
	e, err = Open(ctx, Options{Home: h, FeedbackWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, `{"id":"cm_4"}`, `{"id":"cm_5"}`)
	if got := ingested(t, h); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("after reopen ingested %q, want %q", got, want)
	}
	fb = string(readView(t, h, projections.FeedbackView))
	if !strings.HasSuffix(fb, "{\"id\":\"cm_4\"}\n{\"id\":\"cm_5\"}\n{\"id\":\"cm_6\"") {
		t.Fatalf("partial line consumed or moved:\n%s", fb)
	}
	// A rebuild reproduces everything but the unfinished line, which
	// --check does not count yet.
	rebuildAndCompare(t, h)
	// Completed later, it is ingested by the next feedback append or sweep.
	appendBytes(t, h, projections.FeedbackView, "}\n")
	if err := e.IngestFeedback(ctx); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, feedbackEvent("fb_3"))
	want = append(want, `{"id":"cm_6"}`)
	if got := ingested(t, h); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("ingested %q, want %q", got, want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rebuildAndCompare(t, h)
	assertNoFeedbackTwice(t, h)
}

// crashPastCheckpoint appends fb_1, checkpoints, appends later (the
// feedback events with these ids) and stops e as a crash right after
// projecting them would: the views keep their lines, the checkpoint goes
// back to the one after fb_1. It returns that checkpoint and feedback.jsonl
// as the crash left it.
func crashPastCheckpoint(t *testing.T, e *Engine, h home.Home, later ...string) (*projections.Checkpoint, []byte) {
	t.Helper()
	mustAppend(t, e, feedbackEvent("fb_1"))
	if err := e.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	cp, err := projections.ReadCheckpoint(h)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint: %v", err)
	}
	evs := make([]*events.Event, len(later))
	for i, id := range later {
		evs[i] = feedbackEvent(id)
	}
	mustAppend(t, e, evs...)
	fb := readView(t, h, projections.FeedbackView)
	e.log.Close()
	e.proj.CloseNoCheckpoint()
	close(e.stop)
	e.wg.Wait()
	if err := os.WriteFile(viewPath(h, "state/checkpoint.json"), mustJSON(t, cp), 0o600); err != nil {
		t.Fatal(err)
	}
	return cp, fb
}

// Foreign lines written after a crash that left our own output unprojected
// and partly written are told apart: our bytes are kept (not duplicated),
// the foreign lines ingested.
func TestCatchUpKeepsOwnUnflushedFeedback(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e := openTest(t, h)
	// Simulate a crash right after the projection: keep the views but put
	// the old checkpoint back, and cut fb_3's line in half (a torn write).
	_, fb := crashPastCheckpoint(t, e, h, "fb_2", "fb_3")
	if err := os.Truncate(viewPath(h, projections.FeedbackView), int64(len(fb)-10)); err != nil {
		t.Fatal(err)
	}
	e, err := Open(ctx, Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(readView(t, h, projections.FeedbackView)); got != string(fb) {
		t.Fatalf("catch-up feedback:\n%s\nwant\n%s", got, fb)
	}
	if got := ingested(t, h); len(got) != 0 {
		t.Fatalf("own output ingested as foreign: %q", got)
	}
	e.Close()
	rebuildAndCompare(t, h)
}

func TestFeedbackSweepIngestsWithoutTraffic(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e, err := Open(context.Background(), Options{Home: h, FeedbackSweep: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	mustAppend(t, e, feedbackEvent("fb_1"))
	appendBytes(t, h, projections.FeedbackView, "{\"id\":\"cm_1\"}\n{\"id\":\"cm_2")
	deadline := time.Now().Add(10 * time.Second)
	for len(ingested(t, h)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("sweep never ingested the complete foreign line")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ingested(t, h); len(got) != 1 || got[0] != `{"id":"cm_1"}` {
		t.Fatalf("ingested %q", got)
	}
}

// The crash case of doc.go's legacy rules: the daemon dies after making a
// feedback event durable but before projecting it, and a legacy writer
// appends a line meanwhile. The foreign line keeps its place (our line goes
// after it), it is ingested, and a rebuild reproduces that layout.
func TestForeignLineWhereUnprojectedOutputBelongs(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e := openTest(t, h)
	// Crash before fb_2 was projected: its line never reached the file.
	cp, _ := crashPastCheckpoint(t, e, h, "fb_2")
	if err := os.Truncate(viewPath(h, projections.FeedbackView), cp.Views[projections.FeedbackView]); err != nil {
		t.Fatal(err)
	}
	appendBytes(t, h, projections.FeedbackView, "{\"id\":\"cm_1\"}\n")

	e, err := Open(ctx, Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	fb := string(readView(t, h, projections.FeedbackView))
	i, j := strings.Index(fb, `{"id":"cm_1"}`), strings.Index(fb, `"id":"fb_2"`)
	if i < 0 || j < 0 || j < i || strings.Count(fb, `"id":"fb_2"`) != 1 {
		t.Fatalf("feedback after catch-up:\n%s", fb)
	}
	if got := ingested(t, h); len(got) != 1 || got[0] != `{"id":"cm_1"}` {
		t.Fatalf("ingested %q", got)
	}
	rebuildAndCompare(t, h)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen plainly, rebuild in place, and lose half of feedback.jsonl:
	// each time the adopted line is recognised, never ingested twice.
	for _, step := range []func(){
		func() { e = openTest(t, h) },
		func() {
			var err error
			if e, err = Open(ctx, Options{Home: h, RebuildViews: true}); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			cut(t, h, projections.FeedbackView, 0.3)
			e = openTest(t, h)
		},
	} {
		step()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if got := ingested(t, h); len(got) != 1 {
			t.Fatalf("ingested %q", got)
		}
		rebuildAndCompare(t, h)
	}
	// A projector writing from empty (replay) lays the file out the same.
	dst := home.Home{Dir: t.TempDir()}
	p := projections.New(dst)
	r, _ := wal.OpenReader(h.WALDir())
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Apply([]*events.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	if d, err := projections.Compare(h, dst); err != nil || d != nil {
		t.Fatalf("replay layout differs: %v %v", d, err)
	}
}

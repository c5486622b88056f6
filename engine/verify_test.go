package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

func openVerifyAfter(t *testing.T, h home.Home, hold <-chan struct{}) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Options{Home: h, Now: fixedClock(), VerifyAfterOpen: true, verifyHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	e.StartVerification()
	return e
}

func waitVerified(t *testing.T, e *Engine) VerifyReport {
	t.Helper()
	done, report := e.Verified()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("verification after open did not end within 30 s")
	}
	return report()
}

// flipAt xors one byte of a view file at off and returns the file's bytes
// before the flip.
func flipAt(t *testing.T, h home.Home, view string, off int) []byte {
	t.Helper()
	b, err := os.ReadFile(viewPath(h, view))
	if err != nil || len(b) <= off+2*projections.TailBytes {
		t.Fatalf("%s: %d bytes (%v), want more than %d", view, len(b), err, off+2*projections.TailBytes)
	}
	orig := bytes.Clone(b)
	b[off] ^= 0x01
	if err := os.WriteFile(viewPath(h, view), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return orig
}

// TestVerifyAfterOpenRegeneratesViewDamagedAnywhere: with VerifyAfterOpen
// (the daemon), Open checks only the views' tails; a byte really flipped
// far before the tail of runs.jsonl and of feedback.jsonl is found by the
// verification after open, which regenerates the views while appends go
// on: the report names both views, the files hold the log's bytes again,
// every feedback id is in feedback.jsonl once, and the views equal a
// fresh rebuild of the log including the appends made meanwhile.
func TestVerifyAfterOpenRegeneratesViewDamagedAnywhere(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	appendWorkload(t, e, projections.WorkloadEveryType, 7, 600)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	ingested := countIngested(feedbackIDs(t, h))
	origRuns := flipAt(t, h, projections.RunsView, 10)
	origFeedback := flipAt(t, h, projections.FeedbackView, 20)

	hold := make(chan struct{})
	e = openVerifyAfter(t, h, hold)
	// Open did not read the views whole: the flips are still there.
	if b, _ := os.ReadFile(viewPath(h, projections.RunsView)); bytes.Equal(b, origRuns) {
		t.Fatal("runs.jsonl was rebuilt at open: the whole-view check was not deferred")
	}
	if rep := e.Regenerated(); rep != nil {
		t.Fatalf("open regenerated the views: %+v", rep)
	}
	// Appends before and during the verification.
	appendWorkload(t, e, projections.WorkloadMixedLab, 8, 50)
	close(hold)
	appendWorkload(t, e, projections.WorkloadMixedLab, 9, 50)
	rep := waitVerified(t, e)
	if rep.Err != nil {
		t.Fatalf("verification: %v", rep.Err)
	}
	want := []string{projections.FeedbackView, projections.RunsView}
	if !slices.Equal(rep.Damaged, want) {
		t.Fatalf("damaged %v, want %v", rep.Damaged, want)
	}
	if rep.Regenerated == nil || rep.Views == 0 || rep.Bytes <= int64(len(origRuns)) {
		t.Fatalf("report %+v", rep)
	}
	appendWorkload(t, e, projections.WorkloadMixedLab, 10, 50)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(viewPath(h, projections.RunsView)); !bytes.HasPrefix(b, origRuns) {
		t.Fatal("runs.jsonl does not start with its bytes before the flip")
	}
	if b, _ := os.ReadFile(viewPath(h, projections.FeedbackView)); !bytes.HasPrefix(b, origFeedback) {
		t.Fatal("feedback.jsonl does not start with its bytes before the flip")
	}
	// The damaged line was not taken for another program's: nothing ingested.
	if n := countIngested(feedbackIDs(t, h)); n != ingested {
		t.Fatalf("%d feedback.ingested events, want %d", n, ingested)
	}
	rebuildAndCompare(t, h)
}

// TestVerifyAfterOpenDamageSurvivesAnUnverifiedRun: a daemon that stops
// before its verification ran (or finished) has extended the trusted CRCs
// in its checkpoints; the damaged byte is still found by the next open's
// verification, and an open without VerifyAfterOpen finds it at once.
func TestVerifyAfterOpenDamageSurvivesAnUnverifiedRun(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	appendWorkload(t, e, projections.WorkloadEveryType, 7, 600)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	orig := flipAt(t, h, projections.RunsView, 10)

	e = openVerifyAfter(t, h, make(chan struct{})) // held until Close
	appendWorkload(t, e, projections.WorkloadMixedLab, 8, 100)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := waitVerified(t, e); !errors.Is(rep.Err, context.Canceled) || rep.Damaged != nil {
		t.Fatalf("held verification: %+v", rep)
	}
	if b, _ := os.ReadFile(viewPath(h, projections.RunsView)); bytes.HasPrefix(b, orig) {
		t.Fatal("the flip disappeared without a verification")
	}
	e = openVerifyAfter(t, h, nil)
	rep := waitVerified(t, e)
	if !slices.Equal(rep.Damaged, []string{projections.RunsView}) || rep.Err != nil {
		t.Fatalf("report %+v", rep)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(viewPath(h, projections.RunsView)); !bytes.HasPrefix(b, orig) {
		t.Fatal("runs.jsonl not regenerated")
	}
	rebuildAndCompare(t, h)

	// A clean home: the verification reads every view and finds nothing.
	e = openVerifyAfter(t, h, nil)
	rep = waitVerified(t, e)
	if rep.Err != nil || rep.Damaged != nil || rep.Regenerated != nil || rep.Views == 0 {
		t.Fatalf("clean report %+v", rep)
	}
	mustAppend(t, e, events.MustNew("lab_x", &events.LabSessionStarted{SessionID: "lab_x", Version: "t", Pid: 1}))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func countIngested(ids []string) int {
	n := 0
	for _, id := range ids {
		if len(id) > 9 && id[:9] == "ingested:" {
			n++
		}
	}
	return n
}

// TestVerifyAfterOpenFindsDamagedSealedView: a closed block's output view
// leaves the checkpoint for state/sealed-views.jsonl (the checkpoint
// vouches for that file once); with VerifyAfterOpen, Open opens no sealed
// view, and the verification after open reads them: a byte flipped in one
// is named in the report and regenerated, the views then equal a rebuild.
func TestVerifyAfterOpenFindsDamagedSealedView(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	appendWorkload(t, e, projections.WorkloadEveryType, 7, 3000)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cp, err := projections.ReadCheckpoint(h)
	if err != nil || cp.Sealed == nil || cp.Sealed.Count == 0 {
		t.Fatalf("no sealed views after 3000 events: %+v %v", cp, err)
	}
	// The largest block view the checkpoint no longer lists.
	var victim string
	var size int64
	outs, _ := filepath.Glob(filepath.Join(h.Dir, "pty", "*", "blocks", "*.out"))
	for _, o := range outs {
		v := h.Rel(o)
		fi, _ := os.Stat(o)
		if _, listed := cp.Views[v]; !listed && fi.Size() > size {
			victim, size = v, fi.Size()
		}
	}
	if size < 2 {
		t.Fatalf("no sealed block view with bytes (%d block views)", len(outs))
	}
	b, _ := os.ReadFile(viewPath(h, victim))
	b[0] ^= 0x01
	os.WriteFile(viewPath(h, victim), b, 0o600)

	e = openVerifyAfter(t, h, nil)
	rep := waitVerified(t, e)
	if rep.Err != nil || !slices.Contains(rep.Damaged, victim) || rep.Regenerated == nil {
		t.Fatalf("verification after open: damaged %v, regenerated %v, err %v; want %s regenerated", rep.Damaged, rep.Regenerated != nil, rep.Err, victim)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rebuildAndCompare(t, h)
}

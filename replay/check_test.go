package replay

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// lineStart returns the byte offset of line n (1-based) of a file.
func lineStart(t *testing.T, path string, n int) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var off int64
	for i := 1; i < n; i++ {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		off += int64(len(l))
	}
	return off
}

func TestCheckIdentical(t *testing.T) {
	ctx := context.Background()
	live := liveHome(t, filepath.Join(t.TempDir(), "live"), workload(t, 11, 80), lineFactory(0, 0))
	rep, err := Check(ctx, CheckOptions{Home: live, Shadow: t.TempDir(), Projector: withLines})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Identical || rep.First != nil || rep.LastSeq != 80 || rep.Events != 80 {
		t.Fatalf("report %+v, want identical over 80 events", rep)
	}
	if rep.Files < 2 {
		t.Fatalf("compared %d files, want ≥ 2", rep.Files)
	}
	// Every event type, production views only.
	live = liveHome(t, filepath.Join(t.TempDir(), "every"), slices.Collect(projections.Workload(projections.WorkloadEveryType, 9, 300)), nil)
	rep, err = Check(ctx, CheckOptions{Home: live})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Identical || rep.Events != 300 || rep.Files < 5 {
		t.Fatalf("every-type workload: %+v first %+v", rep, rep.First)
	}
}

// TestCheckNamesWrongProjectorSeqFileOffset: a projector that writes one
// wrong byte for event K makes Check name K, the file and the exact offset.
func TestCheckNamesWrongProjectorSeqFileOffset(t *testing.T) {
	ctx := context.Background()
	const bugSeq, bugPos = 37, 9 // the ',' after `{"seq":37`; the bug flips its 0x20 bit
	evs := workload(t, 5, 90)
	live := liveHome(t, filepath.Join(t.TempDir(), "live"), evs, lineFactory(0, 0))
	rep, err := Check(ctx, CheckOptions{Home: live, Projector: withBuggyLines(bugSeq, bugPos)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identical || rep.First == nil {
		t.Fatalf("wrong projector not detected: %+v", rep)
	}
	want := lineStart(t, filepath.Join(live.Dir, "lab", "testviews", "trace.jsonl"), bugSeq) + bugPos
	d := rep.First
	if d.Seq != bugSeq || d.File != "lab/testviews/trace.jsonl" || d.Offset != want {
		t.Fatalf("first divergence seq %d file %s offset %d, want seq %d lab/testviews/trace.jsonl offset %d", d.Seq, d.File, d.Offset, bugSeq, want)
	}
	if d.Event == nil || d.Event.Seq != bugSeq || d.Event.Type != evs[bugSeq-1].Type {
		t.Fatalf("divergence names event %+v, want seq %d of type %s", d.Event, bugSeq, evs[bugSeq-1].Type)
	}
	if len(rep.All) != 1 {
		t.Fatalf("%d diverging files, want 1 (spool is right): %+v", len(rep.All), rep.All)
	}
	if !strings.HasPrefix(d.Live, `,"type":`) || !strings.HasPrefix(d.Shadow, "\f\"type\":") {
		t.Fatalf("quoted bytes live %q shadow %q", d.Live, d.Shadow)
	}

	// --from after the bad event: its bytes are not compared, the rest matches.
	rep, err = Check(ctx, CheckOptions{Home: live, From: bugSeq + 1, Projector: withBuggyLines(bugSeq, bugPos)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Identical {
		t.Fatalf("--from %d still reports %+v", bugSeq+1, rep.First)
	}
	// --from at the bad event: reported.
	rep, err = Check(ctx, CheckOptions{Home: live, From: bugSeq, Projector: withBuggyLines(bugSeq, bugPos)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identical || rep.First.Seq != bugSeq {
		t.Fatalf("--from %d: %+v", bugSeq, rep.First)
	}
	if _, err := Check(ctx, CheckOptions{Home: live, From: 91}); err == nil {
		t.Fatal("--from past the end of the log succeeded")
	}
}

// TestCheckForeignAndMissingBytes: bytes in a live view that no event
// produced are reported with seq 0; a view the live home lost is reported
// at offset 0 with the event that first wrote it.
func TestCheckForeignAndMissingBytes(t *testing.T) {
	ctx := context.Background()
	evs := workload(t, 5, 60)
	live := liveHome(t, filepath.Join(t.TempDir(), "live"), evs, lineFactory(0, 0))
	tracePath := filepath.Join(live.Dir, "lab", "testviews", "trace.jsonl")
	before, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := appendFile(tracePath, []byte("junk\n")); err != nil {
		t.Fatal(err)
	}
	spool := filepath.Join(live.Dir, "lab", "testviews", "conv1.spool")
	if err := os.Remove(spool); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(ctx, CheckOptions{Home: live, Projector: withLines, LagWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.All) != 2 {
		t.Fatalf("divergences %+v, want 2", rep.All)
	}
	firstOut := 0
	for i, ev := range evs {
		if ev.Type == events.TypePtyOutput {
			firstOut = i + 1
			break
		}
	}
	d := rep.All[0]
	if d.File != "lab/testviews/conv1.spool" || d.Offset != 0 || d.Seq != uint64(firstOut) || d.LiveSize != -1 {
		t.Fatalf("missing spool reported as %+v, want offset 0 seq %d", d, firstOut)
	}
	d = rep.All[1]
	if d.File != "lab/testviews/trace.jsonl" || d.Offset != int64(len(before)) || d.Seq != 0 || d.Live != "junk\n" {
		t.Fatalf("foreign bytes reported as %+v, want seq 0 at %d", d, len(before))
	}
}

func TestDecodeListsUndecodable(t *testing.T) {
	ctx := context.Background()
	evs := workload(t, 9, 12)
	evs[4].V = 99 // a version from the future
	bad, err := events.Marshal("not a payload")
	if err != nil {
		t.Fatal(err)
	}
	evs[7].Data = bad
	live := liveHome(t, filepath.Join(t.TempDir(), "live"), evs, nil)
	log, err := OpenLog(live.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Decode(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 12 || len(rep.Failures) != 2 || rep.Failures[0].Seq != 5 || rep.Failures[1].Seq != 8 {
		t.Fatalf("decode report %+v, want failures at seq 5 and 8", rep)
	}
	if !strings.Contains(rep.Failures[0].Error, "unknown schema version") {
		t.Fatalf("failure 1: %s", rep.Failures[0].Error)
	}
}

// TestCheckNamesEventOfDamagedProductionView flips one byte in the middle
// of the production runs view: Check names the run.imported event whose
// line holds that byte, with the production projector as the shadow.
func TestCheckNamesEventOfDamagedProductionView(t *testing.T) {
	ctx := context.Background()
	evs := workload(t, 21, 120)
	live := liveHome(t, filepath.Join(t.TempDir(), "live"), evs, nil)
	var runSeqs []uint64
	for i, ev := range evs {
		if ev.Type == events.TypeRunImported {
			runSeqs = append(runSeqs, uint64(i+1))
		}
	}
	if len(runSeqs) < 3 {
		t.Fatalf("workload has %d runs", len(runSeqs))
	}
	path := filepath.Join(live.Dir, "lab", "runs.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) < len(runSeqs) {
		t.Fatalf("runs view has %d lines for %d runs", len(lines), len(runSeqs))
	}
	// Damage the third run's line, 5 bytes in.
	off := len(lines[0]) + len(lines[1]) + 5
	b[off] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(ctx, CheckOptions{Home: live})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identical || len(rep.All) != 1 {
		t.Fatalf("report %+v", rep.All)
	}
	d := rep.First
	if d.File != "lab/runs.jsonl" || d.Offset != int64(off) || d.Seq != runSeqs[2] || d.Event.Type != events.TypeRunImported {
		t.Fatalf("divergence %s@%d seq %d, want lab/runs.jsonl@%d seq %d", d.File, d.Offset, d.Seq, off, runSeqs[2])
	}
	// --from past that event ignores its bytes; --from at it does not.
	if rep, err := Check(ctx, CheckOptions{Home: live, From: runSeqs[2] + 1}); err != nil || !rep.Identical {
		t.Fatalf("--from %d: %v %+v", runSeqs[2]+1, err, rep.First)
	}
	if rep, err := Check(ctx, CheckOptions{Home: live, From: runSeqs[2]}); err != nil || rep.Identical || rep.First.Seq != runSeqs[2] {
		t.Fatalf("--from %d: %v %+v", runSeqs[2], err, rep.First)
	}
}

// TestCheckWhileDaemonAppends runs Check on a home whose owner keeps
// appending: entries the shadow projected but the owner has not applied
// yet, and views that grew past the shadow, are not differences.
func TestCheckWhileDaemonAppends(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "live")}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	evs := cloneEvents(slices.Collect(projections.Workload(projections.WorkloadMixedLab, 17, 20000)))
	if _, err := eng.Append(ctx, evs[:500]...); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for _, ev := range evs[500:] {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := eng.Append(ctx, ev); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	overlapped := 0
	for i := 0; i < 4; i++ {
		rep, err := Check(ctx, CheckOptions{Home: h})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Identical {
			t.Fatalf("check %d at seq %d while appending: %+v", i, rep.LastSeq, rep.First)
		}
		if eng.Log().LastSeq() > rep.LastSeq {
			overlapped++
		}
	}
	if overlapped == 0 {
		t.Fatal("the appender never ran during a check")
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAwaitLagging: a live view that is a strict prefix of its shadow is
// compared again until it catches up; one that never does is reported once
// LagWait has passed.
func TestAwaitLagging(t *testing.T) {
	ctx := context.Background()
	live, shadow := home.Home{Dir: t.TempDir()}, home.Home{Dir: t.TempDir()}
	full := "line one\nline two\n"
	for _, f := range []string{"lab/runs.jsonl", "steps/steps.jsonl"} {
		if err := appendFile(filepath.Join(shadow.Dir, f), []byte(full)); err != nil {
			t.Fatal(err)
		}
		if err := appendFile(filepath.Join(live.Dir, f), []byte(full[:9])); err != nil {
			t.Fatal(err)
		}
	}
	never := func() bool { return false }
	divs, _, err := compareHomes(live, shadow, nil, never)
	if err != nil {
		t.Fatal(err)
	}
	if len(divs) != 2 || !lagging(divs[0]) || !lagging(divs[1]) {
		t.Fatalf("divergences %+v, want 2 lagging", divs)
	}
	// The owner catches up on runs.jsonl only.
	caught := make(chan error, 1)
	go func() { caught <- appendFile(filepath.Join(live.Dir, "lab", "runs.jsonl"), []byte(full[9:])) }()
	if err := <-caught; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := awaitLagging(ctx, CheckOptions{Home: live, LagWait: 300 * time.Millisecond}, shadow, nil, never, divs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].File != "steps/steps.jsonl" || got[0].Offset != 9 {
		t.Fatalf("after waiting: %+v, want steps/steps.jsonl at 9", got)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Fatal("gave up on the lagging file before LagWait")
	}
	// LagWait < 0: no waiting at all.
	divs, _, _ = compareHomes(live, shadow, nil, never)
	if got, err := awaitLagging(ctx, CheckOptions{Home: live, LagWait: -1}, shadow, nil, never, divs); err != nil || len(got) != 1 {
		t.Fatalf("LagWait -1: %+v %v", got, err)
	}
}

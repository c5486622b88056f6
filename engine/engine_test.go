package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

func openTest(t *testing.T, h home.Home) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Options{Home: h, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// fixedClock returns a clock that advances 1 ms per call from a fixed instant.
func fixedClock() func() time.Time {
	t0 := time.Date(2026, 2, 6, 12, 0, 0, 0, time.UTC)
	n := 0
	return func() time.Time { n++; return t0.Add(time.Duration(n) * time.Millisecond) }
}

func readView(t *testing.T, h home.Home, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustAppend(t *testing.T, e *Engine, evs ...*events.Event) []uint64 {
	t.Helper()
	seqs, err := e.Append(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// The terminal depends on output.spool and blocks/<id>.out being exactly
// the concatenation of their pty.output data (and prompt lines for the
// spool), readable as soon as Append returns.
func TestPtySpoolIsConcatenationReadableAtOnce(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	defer e.Close()
	conv := "conv_1"
	blk := events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "echo hi", Cwd: "/", Status: events.BlockRunning, OutputPath: "blocks/blk_1.out"}
	mustAppend(t, e, events.MustNew(conv, &events.PtyBlockBegin{Block: blk}))
	var spool, out bytes.Buffer
	chunks := []string{"hello\n", "wor", "ld\n", "", "\x00\xff binary\n"}
	for _, c := range chunks {
		mustAppend(t, e, events.MustNew(conv, &events.PtyOutput{BlockID: "blk_1", SpoolOffset: int64(spool.Len()), Data: []byte(c)}))
		spool.WriteString(c)
		out.WriteString(c)
		if got := readView(t, h, projections.PtySpoolView(conv)); !bytes.Equal(got, spool.Bytes()) {
			t.Fatalf("spool after %q = %q, want %q", c, got, spool.Bytes())
		}
		if got := readView(t, h, projections.PtyBlockOutputView(conv, "blk_1")); !bytes.Equal(got, out.Bytes()) {
			t.Fatalf("block out = %q, want %q", got, out.Bytes())
		}
	}
	line := "__FWS_PROMPT__ ts=1 cwd_b64=Lw== exit=0\n"
	mustAppend(t, e, events.MustNew(conv, &events.PtyPrompt{PromptTS: 1, Cwd: "/", SpoolOffset: int64(spool.Len()), Line: line}))
	spool.WriteString(line)
	mustAppend(t, e, events.MustNew(conv, &events.PtyOutput{SpoolOffset: int64(spool.Len()), Data: []byte("no block\n")}))
	spool.WriteString("no block\n")
	blk.Status = events.BlockCompleted
	zero := 0
	blk.ExitCode = &zero
	mustAppend(t, e, events.MustNew(conv, &events.PtyBlockEnd{Block: blk}))
	if got := readView(t, h, projections.PtySpoolView(conv)); !bytes.Equal(got, spool.Bytes()) {
		t.Fatalf("spool = %q, want %q", got, spool.Bytes())
	}
	if got := readView(t, h, projections.PtyBlockOutputView(conv, "blk_1")); !bytes.Equal(got, out.Bytes()) {
		t.Fatalf("block out = %q, want %q", got, out.Bytes())
	}
	blocks := readView(t, h, projections.PtyBlocksView(conv))
	if n := bytes.Count(blocks, []byte("\n")); n != 2 {
		t.Fatalf("blocks.jsonl has %d lines, want 2:\n%s", n, blocks)
	}
	evl := readView(t, h, projections.PtyEventsView(conv))
	if n := bytes.Count(evl, []byte("\n")); n != 9 {
		t.Fatalf("events.jsonl has %d lines, want 9:\n%s", n, evl)
	}
	if bytes.Contains(evl, []byte("binary")) {
		t.Fatalf("events.jsonl repeats output bytes:\n%s", evl)
	}
}

// rebuildAndCompare rebuilds h's views from its log into a temporary home
// and fails the test on the first difference.
func rebuildAndCompare(t *testing.T, h home.Home) {
	t.Helper()
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	dst := home.Home{Dir: t.TempDir()}
	if _, err := projections.Rebuild(context.Background(), r.Events(1), dst, projections.RebuildOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	d, err := projections.Compare(h, dst)
	if err != nil {
		t.Fatal(err)
	}
	if d != nil {
		t.Fatalf("views differ from a rebuild: %s", d)
	}
}

func appendWorkload(t *testing.T, e *Engine, kind int, seed uint64, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var batch []*events.Event
	for ev := range projections.Workload(kind, seed, n) {
		batch = append(batch, ev)
		if len(batch) >= 1+rng.IntN(8) {
			mustAppend(t, e, batch...)
			batch = nil
		}
	}
	if len(batch) > 0 {
		mustAppend(t, e, batch...)
	}
}

func TestRandomWorkloadRebuildCheckIdentical(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e, err := Open(context.Background(), Options{Home: h, CheckpointEvery: 50})
	if err != nil {
		t.Fatal(err)
	}
	appendWorkload(t, e, projections.WorkloadEveryType, 11, 1500)
	// Concurrent appenders, each group committed together.
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for ev := range projections.Workload(projections.WorkloadMixedLab, uint64(100+g), 100) {
				if _, err := e.Append(context.Background(), ev); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	// Live views (flushed, not checkpointed) already equal a rebuild.
	rebuildAndCompare(t, h)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rebuildAndCompare(t, h)
	// Every event type was exercised.
	seen := map[string]bool{}
	r, _ := wal.OpenReader(h.WALDir())
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		seen[ev.Type] = true
	}
	for _, typ := range events.Types() {
		if !seen[typ] {
			t.Errorf("workload never produced %s", typ)
		}
	}
	// Invalid ids never escaped the home.
	if _, err := os.Stat(filepath.Join(filepath.Dir(h.Dir), "escape")); err == nil {
		t.Fatal("a conversation id escaped the home")
	}
	cp, err := projections.ReadCheckpoint(h)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint after close: %v %v", cp, err)
	}
	r2, _ := wal.OpenReader(h.WALDir())
	last, _ := r2.LastSeq()
	if cp.Seq != last {
		t.Fatalf("checkpoint seq %d, log ends at %d", cp.Seq, last)
	}
}

func TestDamagedViewsRepairedOnOpen(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, h home.Home)
	}{
		{"deleted runs", func(t *testing.T, h home.Home) { rm(t, h, projections.RunsView) }},
		{"truncated session events", func(t *testing.T, h home.Home) { cut(t, h, projections.SessionEventsView("lab_s1"), 0.5) }},
		{"deleted spool", func(t *testing.T, h home.Home) { rm(t, h, projections.PtySpoolView("conv_a")) }},
		{"truncated block output", func(t *testing.T, h home.Home) {
			outs, _ := filepath.Glob(filepath.Join(h.Dir, "pty", "conv_a", "blocks", "*.out"))
			if len(outs) == 0 {
				t.Fatal("workload wrote no block output")
			}
			cut(t, h, h.Rel(outs[len(outs)-1]), 0.3)
		}},
		{"truncated feedback", func(t *testing.T, h home.Home) { cut(t, h, projections.FeedbackView, 0.5) }},
		{"deleted steps", func(t *testing.T, h home.Home) { rm(t, h, projections.StepsView) }},
		{"deleted checkpoint", func(t *testing.T, h home.Home) { rm(t, h, "state/checkpoint.json") }},
		{"garbage past checkpoint", func(t *testing.T, h home.Home) {
			for _, v := range []string{projections.RunsView, projections.ExperimentsView, projections.PtySpoolView("conv_b"), projections.StepsView} {
				appendBytes(t, h, v, "{\"garbage\":tru")
			}
		}},
		{"garbage and a half-written line past checkpoint", func(t *testing.T, h home.Home) {
			appendBytes(t, h, projections.SessionIdempotencyView("lab_s0"), "{\"requestId\":\"x\"}\n{\"requestId\"")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := home.Home{Dir: t.TempDir()}
			e := openTest(t, h)
			appendWorkload(t, e, projections.WorkloadEveryType, 5, 600)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, h)
			e = openTest(t, h)
			rebuildAndCompare(t, h)
			// And the repaired home keeps working.
			appendWorkload(t, e, projections.WorkloadEveryType, 6, 100)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			rebuildAndCompare(t, h)
		})
	}
}

func viewPath(h home.Home, rel string) string { return filepath.Join(h.Dir, filepath.FromSlash(rel)) }

func rm(t *testing.T, h home.Home, rel string) {
	t.Helper()
	if err := os.Remove(viewPath(h, rel)); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, h home.Home, rel string, frac float64) {
	t.Helper()
	fi, err := os.Stat(viewPath(h, rel))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 2 {
		t.Fatalf("%s too small to cut (%d bytes)", rel, fi.Size())
	}
	if err := os.Truncate(viewPath(h, rel), int64(float64(fi.Size())*frac)); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, h home.Home, rel, s string) {
	t.Helper()
	f, err := os.OpenFile(viewPath(h, rel), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A second process opening a home whose log is held must fail on the lock
// before touching any view.
func TestOpenOfLockedHomeTouchesNoView(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	defer e.Close()
	appendWorkload(t, e, projections.WorkloadMixedLab, 3, 50)
	if err := e.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	appendWorkload(t, e, projections.WorkloadMixedLab, 4, 10) // past the checkpoint
	before := readView(t, h, projections.RunsView)
	_, err := Open(context.Background(), Options{Home: h, RebuildViews: true})
	if !errors.Is(err, wal.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if after := readView(t, h, projections.RunsView); !bytes.Equal(before, after) {
		t.Fatalf("a refused open changed lab/runs.jsonl (%d → %d bytes)", len(before), len(after))
	}
}

// A view deleted while the engine runs is rebuilt at the next open.
func TestViewDeletedWhileRunning(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	appendWorkload(t, e, projections.WorkloadEveryType, 8, 300)
	// Deleted under open file descriptors: later writes go to the unlinked files.
	rm(t, h, projections.RunsView)
	rm(t, h, projections.PtySpoolView("conv_a"))
	appendWorkload(t, e, projections.WorkloadEveryType, 9, 300)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openTest(t, h)
	e.Close()
	rebuildAndCompare(t, h)
}

// A read-only engine brings the views up to the log but refuses appends.
func TestReadOnlyCatchesUpAndRefusesAppends(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	appendWorkload(t, e, projections.WorkloadMixedLab, 2, 200)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rm(t, h, projections.ExperimentsView)
	ro, err := Open(context.Background(), Options{Home: h, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rebuildAndCompare(t, h)
	if _, err := ro.Append(context.Background(), feedbackEvent("fb_x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append on a read-only engine: %v", err)
	}
	if err := ro.IngestFeedback(context.Background()); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("ingest on a read-only engine: %v", err)
	}
}

package compact

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/wal"
)

// clock is a settable test clock.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *clock) set(t time.Time)     { c.ms.Store(t.UnixMilli()) }
func (c *clock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func filler(i int) *events.Event {
	return events.MustNew("filler", &events.WalSalvaged{LostSeq: uint64(i), Segment: "test", Reason: strings.Repeat("f", 60)})
}

// testHome is a home whose log has, in 1 KiB segments: a mandate m0
// planned and completed (seq 1–2) and 38 fillers, five days old (3–40); a mandate planned then (seq 41) whose step s1
// completed (42) and s2 stays pending; 40 fillers three days old
// (43–82); a terminal block begun (83) and never ended; 40 fillers one
// hour old (84–123).
type testHome struct {
	h        home.Home
	eng      *engine.Engine
	clk      *clock
	appendFn func(evs ...*events.Event) uint64
}

func newTestHome(t *testing.T) *testHome {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	clk := &clock{}
	clk.set(t0)
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 1024, Now: clk.now, CheckpointEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	th := &testHome{h: h, eng: eng, clk: clk}
	th.appendFn = func(evs ...*events.Event) uint64 {
		t.Helper()
		seqs, err := eng.Append(context.Background(), evs...)
		if err != nil {
			t.Fatal(err)
		}
		return seqs[0]
	}
	// A mandate done long ago: its lines in steps/steps.jsonl come from
	// segments a compaction removes.
	th.appendFn(events.MustNew("m0", &events.StepPlanned{MandateID: "m0", Steps: []events.PlannedStep{{StepID: "s1", Tool: "sh", ParamsHash: "sha256-0", IdemKey: "k0"}}}))
	th.appendFn(events.MustNew("m0", &events.StepCompleted{MandateID: "m0", StepID: "s1", PostHash: "sha256-p", ResultHash: "sha256-r"}))
	for i := range 38 {
		th.appendFn(filler(i))
	}
	if seq := th.appendFn(events.MustNew("m1", &events.StepPlanned{MandateID: "m1", Steps: []events.PlannedStep{
		{StepID: "s1", Tool: "sh", ParamsHash: "sha256-1", IdemKey: "k1"},
		{StepID: "s2", Tool: "sh", ParamsHash: "sha256-2", IdemKey: "k2"},
	}})); seq != 41 {
		t.Fatalf("planned at %d", seq)
	}
	th.appendFn(events.MustNew("m1", &events.StepCompleted{MandateID: "m1", StepID: "s1", PostHash: "sha256-p", ResultHash: "sha256-r"}))
	clk.add(2 * 24 * time.Hour)
	for i := range 40 {
		th.appendFn(filler(100 + i))
	}
	if seq := th.appendFn(events.MustNew("conv1", &events.PtyBlockBegin{Block: events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "sleep 9", Status: events.BlockRunning}})); seq != 83 {
		t.Fatalf("block begun at %d", seq)
	}
	clk.add(3*24*time.Hour - time.Hour)
	for i := range 40 {
		th.appendFn(filler(200 + i))
	}
	clk.add(time.Hour) // now: the last fillers are an hour old
	if err := eng.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	return th
}

func holdOf(t *testing.T, rep Report, prefix string) Hold {
	t.Helper()
	for _, h := range rep.Holders {
		if strings.HasPrefix(h.Name, prefix) {
			return h
		}
	}
	t.Fatalf("no holder %q in %+v", prefix, rep.Holders)
	return Hold{}
}

func TestPlanHolders(t *testing.T) {
	th := newTestHome(t)
	rep, err := Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for prefix, want := range map[string]uint64{
		"checkpoint":           124,
		"open steps":           41,
		"open terminal blocks": 83,
		"auto-resume window":   84,
		"read models":          1,
	} {
		if got := holdOf(t, rep, prefix).Seq; got != want {
			t.Errorf("holder %s: seq %d, want %d", prefix, got, want)
		}
	}
	if !holdOf(t, rep, "read models").Waived {
		t.Error("read models not waived by an archive")
	}
	if rep.Needed != 41 || rep.HeldBy != "open steps" || rep.Before != 41 || rep.PolicySeq != 124 {
		t.Fatalf("needed %d by %q, before %d, policy %d", rep.Needed, rep.HeldBy, rep.Before, rep.PolicySeq)
	}
	segs, _ := wal.Segments(th.h.WALDir())
	n := wal.Removable(segs, 41)
	if n == 0 || len(rep.Segments) != n || rep.NewFirstSeq != segs[n].First || rep.NewFirstSeq > 41 {
		t.Fatalf("plan removes %d segments to %d; want %d", len(rep.Segments), rep.NewFirstSeq, n)
	}
	// Deleting: the read models hold everything.
	rep, err = Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, DryRun: true})
	if err != nil || rep.Needed != 1 || !strings.HasPrefix(rep.HeldBy, "read models") || len(rep.Segments) != 0 {
		t.Fatalf("delete plan: %+v %v", rep, err)
	}
}

func TestPlanFollowsClosedStepsAndBlocks(t *testing.T) {
	th := newTestHome(t)
	th.appendFn(events.MustNew("m1", &events.StepFailed{MandateID: "m1", StepID: "s2", ErrorClass: "exit", ErrorMsg: "1"}))
	th.appendFn(events.MustNew("conv1", &events.PtyBlockEnd{Block: events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "sleep 9", Status: events.BlockCompleted}}))
	th.eng.Checkpoint()
	ship := RetentionHolder{Name: "ship cursor", OldestNeededSeq: func(context.Context) (uint64, error) { return 70, nil }}
	rep, err := Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true, Holders: []RetentionHolder{ship}})
	if err != nil {
		t.Fatal(err)
	}
	if holdOf(t, rep, "open steps").Seq != 0 || holdOf(t, rep, "open terminal blocks").Seq != 0 {
		t.Fatalf("closed steps or blocks still hold: %+v", rep.Holders)
	}
	if rep.Needed != 70 || rep.HeldBy != "ship cursor" {
		t.Fatalf("needed %d by %q", rep.Needed, rep.HeldBy)
	}
	broken := RetentionHolder{Name: "broken", OldestNeededSeq: func(context.Context) (uint64, error) { return 0, errors.New("unreadable") }}
	if _, err := Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Holders: []RetentionHolder{broken}}); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("a failing holder: %v", err)
	}
}

func TestPlanKeepPolicies(t *testing.T) {
	th := newTestHome(t)
	// Close what holds, so that the policies decide.
	th.appendFn(events.MustNew("m1", &events.StepCompleted{MandateID: "m1", StepID: "s2", PostHash: "sha256-p", ResultHash: "sha256-r"}))
	th.appendFn(events.MustNew("conv1", &events.PtyBlockEnd{Block: events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Status: events.BlockCompleted}}))
	th.eng.Checkpoint()
	base := Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true}
	o := base
	o.KeepDays = 4 // the 3-day-old fillers (43–82) and later stay
	rep, err := Plan(context.Background(), th.eng.Log(), o)
	if err != nil || rep.PolicySeq != 43 || rep.Before != 43 {
		t.Fatalf("keep-days: policy %d before %d %v", rep.PolicySeq, rep.Before, err)
	}
	o = base
	o.KeepBytes = 4096
	o.Now = func() time.Time { return th.clk.now().Add(3 * time.Hour) } // out of the resume window
	rep, err = Plan(context.Background(), th.eng.Log(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LogBytes-rep.Bytes > 4096 || rep.LogBytes-rep.Bytes+rep.Segments[len(rep.Segments)-1].Size <= 4096 {
		t.Fatalf("keep-bytes 4096 keeps %d of %d bytes", rep.LogBytes-rep.Bytes, rep.LogBytes)
	}
	for _, bad := range []Options{{KeepDays: 1, KeepBytes: 1}, {KeepDays: -1}} {
		if _, err := Plan(context.Background(), th.eng.Log(), bad); !errors.Is(err, ErrOptions) {
			t.Fatalf("options %+v: %v", bad, err)
		}
	}
}

func TestRunArchiveKeepsTheHomeWhole(t *testing.T) {
	th := newTestHome(t)
	archive := filepath.Join(t.TempDir(), "archive")
	rep, err := Run(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: archive})
	if err != nil || len(rep.Segments) == 0 || rep.NewFirstSeq > 41 || rep.NewFirstSeq <= 1 {
		t.Fatalf("run: %+v %v", rep, err)
	}
	if th.eng.Log().FirstSeq() != rep.NewFirstSeq {
		t.Fatalf("log first %d", th.eng.Log().FirstSeq())
	}
	th.appendFn(filler(999))
	if err := th.eng.Close(); err != nil {
		t.Fatal(err)
	}
	// A view rebuilt from the whole log reads the archive.
	eng, err := engine.Open(context.Background(), engine.Options{Home: th.h, SegmentSize: 1024, RebuildViews: true})
	if err != nil {
		t.Fatalf("reopen with a rebuild: %v", err)
	}
	defer eng.Close()
	var seqs []uint64
	if err := eng.Subscribe(engine.ObserverFunc(func(ev *events.Event) { seqs = append(seqs, ev.Seq) })); err != nil {
		t.Fatalf("subscribe from seq 1: %v", err)
	}
	if len(seqs) != 124 || seqs[0] != 1 || seqs[123] != 124 {
		t.Fatalf("subscribe saw %d events (%v…)", len(seqs), seqs[:min(3, len(seqs))])
	}
	dst := home.Home{Dir: t.TempDir()}
	if _, err := projections.Rebuild(context.Background(), eng.Log().Events(1), dst, projections.RebuildOptions{UpTo: 124, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(th.h.StepsFile()); err != nil || !strings.Contains(string(b), `"mandate_id":"m0"`) {
		t.Fatalf("steps view rebuilt without the archived mandate: %s %v", b, err)
	}
	if diff, err := projections.Compare(th.h, dst); err != nil || diff != nil {
		t.Fatalf("rebuilt views differ: %v %v", diff, err)
	}
}

func TestRunENOSPCRemovesNothingAndRetries(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	f := &wal.Faults{}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 1024, Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for i := range 50 {
		if _, err := eng.Append(context.Background(), filler(i)); err != nil {
			t.Fatal(err)
		}
	}
	eng.Checkpoint()
	old := time.Now().Add(3 * time.Hour) // every event is out of the resume window
	before, _ := wal.Segments(h.WALDir())
	o := Options{Home: h, Now: func() time.Time { return old }, Archive: filepath.Join(t.TempDir(), "a")}
	f.FailCompactWrite(syscall.ENOSPC)
	rep, err := Run(context.Background(), eng.Log(), o)
	if !errors.Is(err, syscall.ENOSPC) || rep.NewFirstSeq != 1 {
		t.Fatalf("under ENOSPC: %+v %v", rep, err)
	}
	if after, _ := wal.Segments(h.WALDir()); !slices.Equal(after, before) || eng.Log().FirstSeq() != 1 {
		t.Fatal("segments changed under ENOSPC")
	}
	if _, err := eng.Append(context.Background(), filler(99)); err != nil {
		t.Fatalf("append after a failed compaction: %v", err)
	}
	rep, err = Run(context.Background(), eng.Log(), o)
	if err != nil || rep.NewFirstSeq <= 1 {
		t.Fatalf("retry: %+v %v", rep, err)
	}
}

func TestLoopCompactsPeriodicallyAndStops(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	later := func() time.Time { return time.Now().Add(3 * time.Hour) }
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var runs []Report
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Loop(ctx, eng.Log(), Options{Home: h, Now: later, Archive: filepath.Join(t.TempDir(), "a")}, 10*time.Millisecond, func(r Report, err error) {
			if err != nil {
				t.Errorf("loop run: %v", err)
			}
			mu.Lock()
			runs = append(runs, r)
			mu.Unlock()
		})
	}()
	for i := range 60 {
		if _, err := eng.Append(context.Background(), filler(i)); err != nil {
			t.Fatal(err)
		}
	}
	eng.Checkpoint()
	deadline := time.Now().Add(10 * time.Second)
	for eng.Log().FirstSeq() == 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if eng.Log().FirstSeq() == 1 {
		t.Fatal("the loop never compacted")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) == 0 {
		t.Fatal("no run reported")
	}
	if last := runs[len(runs)-1]; last.FirstSeq > eng.Log().FirstSeq() {
		t.Fatalf("last run %+v", last)
	}
}

// TestPlanHoldsUnshippedEvents: a home that ships keeps, even against an
// archive, every segment holding an event its stream has not acknowledged.
func TestPlanHoldsUnshippedEvents(t *testing.T) {
	th := newTestHome(t)
	if err := cursor.Write(th.h, cursor.State{HomeID: "h1", Stream: "CMLAB_h1", Shipped: 29}); err != nil {
		t.Fatal(err)
	}
	rep, err := Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if h := holdOf(t, rep, "ship cursor"); h.Seq != 30 || h.Waived {
		t.Fatalf("ship cursor hold %+v", h)
	}
	if rep.Needed != 30 || rep.HeldBy != "ship cursor" || rep.Before > 30 {
		t.Fatalf("needed %d by %q, before %d", rep.Needed, rep.HeldBy, rep.Before)
	}
	if len(rep.Segments) > 0 && rep.NewFirstSeq > 30 {
		t.Fatalf("plan removes up to seq %d, past the unshipped seq 30", rep.NewFirstSeq-1)
	}
	// Without the hold the same plan would remove more: the test can fail.
	os.Remove(cursor.File(th.h))
	free, err := Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true})
	if err != nil || free.HeldBy == "ship cursor" {
		t.Fatalf("plan without a cursor: %+v %v", free, err)
	}
}

// TestLoadModelChecksTheSnapshotAgainstTheLog: LoadModel trusts the
// retention model's snapshot when the log holds, at the snapshot's seq,
// the event it names, and refuses it (an empty model) when it names
// another.
func TestLoadModelChecksTheSnapshotAgainstTheLog(t *testing.T) {
	th := newTestHome(t)
	ctx := context.Background()
	src, err := ReaderSource(th.h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := retention.Load(th.h)
	if err != nil {
		t.Fatal(err)
	}
	path := retention.SnapshotFile(th.h)
	if ok, err := m.WriteSnapshot(path, 0); !ok || err != nil {
		t.Fatalf("snapshot not written: %v %v", ok, err)
	}
	got, refused, err := LoadModel(ctx, th.h, src)
	if err != nil || refused != "" || got.Covered() != src.LastSeq() {
		t.Fatalf("LoadModel of a sound snapshot: covers %d, refused %q, %v", got.Covered(), refused, err)
	}
	hd, body, err := snapshot.Read(path, retention.ModelName, retention.Version())
	if err != nil {
		t.Fatal(err)
	}
	hd.EventID = "evt_another"
	if err := snapshot.Write(path, hd, body); err != nil {
		t.Fatal(err)
	}
	got, refused, err = LoadModel(ctx, th.h, src)
	if err != nil || refused == "" || got.Covered() != 0 {
		t.Fatalf("LoadModel of a snapshot naming another event at its seq: covers %d, refused %q, %v", got.Covered(), refused, err)
	}
}

// TestPlanRefusesAnotherHomesCursor: a state/ship.json that names another
// home (copied from one, or left after state/home-id changed) says nothing
// about what this home's stream holds. Trusting its shipped seq let
// compaction archive events never shipped, which the shipper, reading
// the log only, could then never send. The plan refuses and names the fix.
func TestPlanRefusesAnotherHomesCursor(t *testing.T) {
	th := newTestHome(t)
	if err := home.WriteHomeID(th.h, "homeA"); err != nil {
		t.Fatal(err)
	}
	if err := cursor.Write(th.h, cursor.State{HomeID: "homeB", Stream: "CMLAB_homeB", Shipped: 1000}); err != nil {
		t.Fatal(err)
	}
	_, err := Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true})
	if err == nil || !strings.Contains(err.Error(), "homeB") || !strings.Contains(err.Error(), "homeA") || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("Plan with another home's cursor = %v; want a refusal naming both ids and the fix", err)
	}
	// This home's own cursor holds as before.
	if err := cursor.Write(th.h, cursor.State{HomeID: "homeA", Stream: "CMLAB_homeA", Shipped: 29}); err != nil {
		t.Fatal(err)
	}
	rep, err := Plan(context.Background(), th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if h := holdOf(t, rep, "ship cursor"); h.Seq != 30 {
		t.Fatalf("ship cursor hold %+v", h)
	}
}

package compact

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
)

// writeSnap writes a snapshot covering seq for a registered model.
func writeSnap(t *testing.T, sm SnapshotModel, seq uint64) {
	t.Helper()
	if err := snapshot.Write(sm.File, snapshot.Header{Model: sm.Model, Version: sm.Version, Seq: seq, EventID: "x"}, []byte{0x80}); err != nil {
		t.Fatal(err)
	}
}

// TestReadModelsHolderCountsTerminal: while the terminal's read model has
// no snapshot (pty.SnapshotFile is not on main yet), the read-models
// holder keeps the whole log whatever the other snapshots cover, so a
// deleting compaction removes nothing a restart would replay. When the
// term branch lands, register pty.SnapshotFile in init, set
// terminalSnapshotted, and this test changes to expect the minimum.
func TestReadModelsHolderCountsTerminal(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	readModels.mu.Lock()
	fs := readModels.fs
	readModels.mu.Unlock()
	for _, f := range fs {
		writeSnap(t, f(h), 500)
	}
	idx := func(context.Context) (uint64, error) { return 900, nil }
	if got, err := readModelsNeed(context.Background(), h, idx); err != nil || got != 1 {
		t.Fatalf("holder at %d (%v) while the terminal's model has no snapshot, want 1", got, err)
	}
}

// TestReadModelsHolderMinimum: once every read model restarts from a
// snapshot, the holder needs the log after the oldest seq any of them
// covers, the request-id index's included; a missing or untrusted
// snapshot, or an unknown index, keeps the whole log.
func TestReadModelsHolderMinimum(t *testing.T) {
	terminalSnapshotted = true
	defer func() { terminalSnapshotted = false }()
	ctx := context.Background()
	h := home.Home{Dir: t.TempDir()}
	idx := func(context.Context) (uint64, error) { return 900, nil }
	writeAll := func(base uint64) {
		readModels.mu.Lock()
		fs := readModels.fs
		readModels.mu.Unlock()
		for i, f := range fs {
			writeSnap(t, f(h), base+uint64(i))
		}
	}
	// Without labapi's registration of the Lab state, the holder cannot
	// tell what a restart needs.
	writeAll(700)
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("the Lab state unregistered: %d, want 1", got)
	}
	RegisterReadModel(func(hh home.Home) SnapshotModel { // a stand-in for labapi's registration
		return SnapshotModel{File: hh.StateDir() + "/snapshots/labstate.msgpack", Model: "labstate", Version: "1"}
	})
	defer func() {
		readModels.mu.Lock()
		readModels.fs = readModels.fs[:len(readModels.fs)-1]
		readModels.mu.Unlock()
	}()
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("no Lab state snapshot: %d, want 1", got)
	}
	writeAll(700)
	if got, _ := readModelsNeed(ctx, h, idx); got != 701 {
		t.Fatalf("holder at %d, want 701 (the oldest snapshot, seq 700, + 1)", got)
	}
	if got, _ := readModelsNeed(ctx, h, func(context.Context) (uint64, error) { return 300, nil }); got != 301 {
		t.Fatalf("index behind: %d, want 301", got)
	}
	if got, _ := readModelsNeed(ctx, h, nil); got != 1 {
		t.Fatalf("unknown index: %d, want 1", got)
	}
	// A snapshot of another code version (or damaged) does not count.
	sm := SnapshotModel{File: steps.SnapshotFile(h), Model: steps.SnapshotModel, Version: "0/old"}
	writeSnap(t, sm, 800)
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("untrusted steps snapshot: %d, want 1", got)
	}
}

// TestPlanFromSnapshotReadsNoFront: with the retention model's snapshot,
// a plan (a dry run beside a daemon: a reader of the log) answers the
// step, block and window holders from it and the log after it, equal to
// a scan of the whole log, and reads nothing of the log's front: it still
// answers once the first segments are garbage.
func TestPlanFromSnapshotReadsNoFront(t *testing.T) {
	th := newTestHome(t)
	ctx := context.Background()
	want, err := Plan(ctx, th.eng.Log(), Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true, Model: retention.New()})
	if err != nil {
		t.Fatal(err)
	}
	// The model of the log up to seq 100, as the daemon's snapshot.
	m := retention.New()
	for ev, err := range th.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq > 100 {
			break
		}
		m.Observe(ev)
	}
	if ok, err := m.WriteSnapshot(retention.SnapshotFile(th.h), 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := th.eng.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := wal.Segments(th.h.WALDir())
	for _, s := range segs {
		if s.First+20 > 100 {
			break // keep the segment holding seq 100 and after
		}
		os.WriteFile(filepath.Join(th.h.WALDir(), s.Name), bytes.Repeat([]byte{0x5a}, int(s.Size)), 0o600)
	}
	src, err := ReaderSource(th.h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ScanLog(ctx, src, th.clk.now().Add(-DefaultResumeWindow), time.Time{}); err == nil {
		t.Fatal("a scan of the garbled log succeeded: the test proves nothing")
	}
	got, err := Plan(ctx, src, Options{Home: th.h, Now: th.clk.now, Archive: "/x", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Holders, want.Holders) || got.Needed != want.Needed || got.Bytes != want.Bytes {
		t.Fatalf("from the snapshot: %+v\nfrom a scan: %+v", got, want)
	}
}

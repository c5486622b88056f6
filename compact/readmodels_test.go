package compact

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
)

// writeSnaps writes, for every read model the daemon keeps in h, a
// snapshot covering base + its index in the list (the Lab state's under
// the stand-in registration of TestReadModelsHolderMinimum).
func writeSnaps(t *testing.T, h home.Home, base uint64) {
	t.Helper()
	for i, sm := range []SnapshotModel{
		{File: retention.SnapshotFile(h), Model: retention.ModelName, Version: retention.Version()},
		{File: steps.SnapshotFile(h), Model: steps.SnapshotModel, Version: steps.SnapshotVersion()},
		{File: filepath.Join(h.StateDir(), "snapshots", "labstate.msgpack"), Model: "labstate", Version: "test"},
	} {
		if err := snapshot.Write(sm.File, snapshot.Header{Model: sm.Model, Version: sm.Version, Seq: base + uint64(i), EventID: "x"}, []byte{0x80}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadModelsHolderMinimum: the holder needs the log after the oldest
// seq any read model's snapshot covers (the Lab state, the step state,
// the retention model, the terminal), the request-id index's included; a
// missing or untrusted snapshot, an unregistered model or an unknown
// index keeps the whole log.
func TestReadModelsHolderMinimum(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: t.TempDir()}
	term := uint64(0) // the terminal's covered seq (0: no snapshot)
	readModels.mu.Lock()
	saved := slices.Clone(readModels.ms)
	for i, m := range readModels.ms {
		if m.Name == "pty" { // the terminal's own snapshot is tested in package pty
			readModels.ms[i].Covers = func(home.Home) (uint64, error) {
				if term == 0 {
					return 0, os.ErrNotExist
				}
				return term, nil
			}
		}
	}
	readModels.mu.Unlock()
	defer func() {
		readModels.mu.Lock()
		readModels.ms = saved
		readModels.mu.Unlock()
	}()
	idx := func(context.Context) (uint64, error) { return 900, nil }
	writeSnaps(t, h, 700)
	term = 650
	// Without labapi's registration of the Lab state, the holder cannot
	// tell what a restart needs.
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("the Lab state unregistered: %d, want 1", got)
	}
	RegisterReadModel(ReadModel{Name: "labstate", Covers: func(hh home.Home) (uint64, error) { // a stand-in for labapi's
		return SnapshotModel{File: filepath.Join(hh.StateDir(), "snapshots", "labstate.msgpack"), Model: "labstate", Version: "test"}.Covers()
	}})
	if got, _ := readModelsNeed(ctx, h, idx); got != 651 {
		t.Fatalf("holder at %d, want 651 (the terminal's snapshot, seq 650, + 1)", got)
	}
	term = 800
	if got, _ := readModelsNeed(ctx, h, idx); got != 701 {
		t.Fatalf("holder at %d, want 701 (the retention snapshot, seq 700, + 1)", got)
	}
	if got, _ := readModelsNeed(ctx, h, func(context.Context) (uint64, error) { return 300, nil }); got != 301 {
		t.Fatalf("index behind: %d, want 301", got)
	}
	if got, _ := readModelsNeed(ctx, h, nil); got != 1 {
		t.Fatalf("unknown index: %d, want 1", got)
	}
	term = 0
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("no terminal snapshot: %d, want 1", got)
	}
	term = 800
	// A snapshot of another code version (or a damaged one) does not count.
	if err := snapshot.Write(steps.SnapshotFile(h), snapshot.Header{Model: steps.SnapshotModel, Version: "0/old", Seq: 800}, []byte{0x80}); err != nil {
		t.Fatal(err)
	}
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("untrusted steps snapshot: %d, want 1", got)
	}
	writeSnaps(t, h, 700)
	b, _ := os.ReadFile(retention.SnapshotFile(h))
	b[len(b)-1] ^= 1
	os.WriteFile(retention.SnapshotFile(h), b, 0o600)
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("garbled retention snapshot: %d, want 1", got)
	}
}

// TestReadModelsHolderReadsTheTerminalSnapshot: the terminal's snapshot
// (pty.SnapshotFile) is one of the models counted: without it the holder
// keeps the whole log.
func TestReadModelsHolderReadsTheTerminalSnapshot(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	RegisterReadModel(ReadModel{Name: "labstate", Covers: func(home.Home) (uint64, error) { return 900, nil }})
	defer func() {
		readModels.mu.Lock()
		readModels.ms = readModels.ms[:len(readModels.ms)-1]
		readModels.mu.Unlock()
	}()
	writeSnaps(t, h, 700)
	idx := func(context.Context) (uint64, error) { return 900, nil }
	if got, _ := readModelsNeed(ctx0, h, idx); got != 1 {
		t.Fatalf("no pty.msgpack: %d, want 1", got)
	}
	if _, err := os.Stat(pty.SnapshotFile(h)); !os.IsNotExist(err) {
		t.Fatalf("unexpected %s: %v", pty.SnapshotFile(h), err)
	}
}

var ctx0 = context.Background()

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

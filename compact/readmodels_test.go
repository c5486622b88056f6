package compact

import (
	"context"
	"testing"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/steps"
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
	var lab SnapshotModel // a stand-in for labapi's registration
	RegisterReadModel(func(hh home.Home) SnapshotModel {
		lab = SnapshotModel{File: hh.StateDir() + "/snapshots/test-lab.msgpack", Model: "test-lab", Version: "1"}
		return lab
	})
	defer func() {
		readModels.mu.Lock()
		readModels.fs = readModels.fs[:len(readModels.fs)-1]
		readModels.mu.Unlock()
	}()
	idx := func(context.Context) (uint64, error) { return 900, nil }
	if got, _ := readModelsNeed(ctx, h, idx); got != 1 {
		t.Fatalf("no snapshots: %d, want 1", got)
	}
	readModels.mu.Lock()
	fs := readModels.fs
	readModels.mu.Unlock()
	for i, f := range fs {
		writeSnap(t, f(h), uint64(700+i))
	}
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

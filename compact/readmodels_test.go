package compact

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/steps"
)

// writeSnaps writes, for every read model the daemon keeps in h, a
// snapshot covering base + its index in the list (the Lab state's under
// the stand-in row of testReadModels).
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

// testReadModels is a table like the daemon's (daemon.ReadModels): the
// retention and step models, a stand-in for the Lab state's, and the
// terminal's at *term (0: no snapshot; its own snapshot is tested in
// package pty).
func testReadModels(term *uint64) []ReadModel {
	return []ReadModel{
		{Name: retention.ModelName, Covers: func(h home.Home) (uint64, error) {
			return SnapshotModel{File: retention.SnapshotFile(h), Model: retention.ModelName, Version: retention.Version()}.Covers()
		}},
		{Name: steps.SnapshotModel, Covers: func(h home.Home) (uint64, error) {
			return SnapshotModel{File: steps.SnapshotFile(h), Model: steps.SnapshotModel, Version: steps.SnapshotVersion()}.Covers()
		}},
		{Name: "labstate", Covers: func(h home.Home) (uint64, error) {
			return SnapshotModel{File: filepath.Join(h.StateDir(), "snapshots", "labstate.msgpack"), Model: "labstate", Version: "test"}.Covers()
		}},
		{Name: "pty", Covers: func(home.Home) (uint64, error) {
			if *term == 0 {
				return 0, os.ErrNotExist
			}
			return *term, nil
		}},
	}
}

// TestReadModelsHolderMinimum: the holder needs the log after the oldest
// seq any read model's snapshot covers (the Lab state, the step state,
// the retention model, the terminal), the request-id index's included; a
// missing or untrusted snapshot, an empty table or an unknown index keeps
// the whole log.
func TestReadModelsHolderMinimum(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: t.TempDir()}
	term := uint64(0) // the terminal's covered seq (0: no snapshot)
	ms := testReadModels(&term)
	idx := func(context.Context) (uint64, error) { return 900, nil }
	writeSnaps(t, h, 700)
	term = 650
	// Without the daemon's table, the holder cannot tell what a restart
	// needs.
	if got, _ := readModelsNeed(ctx, h, nil, idx); got != 1 {
		t.Fatalf("no read-model table: %d, want 1", got)
	}
	if got, _ := readModelsNeed(ctx, h, ms, idx); got != 651 {
		t.Fatalf("holder at %d, want 651 (the terminal's snapshot, seq 650, + 1)", got)
	}
	term = 800
	if got, _ := readModelsNeed(ctx, h, ms, idx); got != 701 {
		t.Fatalf("holder at %d, want 701 (the retention snapshot, seq 700, + 1)", got)
	}
	if got, _ := readModelsNeed(ctx, h, ms, func(context.Context) (uint64, error) { return 300, nil }); got != 301 {
		t.Fatalf("index behind: %d, want 301", got)
	}
	if got, _ := readModelsNeed(ctx, h, ms, nil); got != 1 {
		t.Fatalf("unknown index: %d, want 1", got)
	}
	term = 0
	if got, _ := readModelsNeed(ctx, h, ms, idx); got != 1 {
		t.Fatalf("no terminal snapshot: %d, want 1", got)
	}
	term = 800
	// A snapshot of another code version (or a damaged one) does not count.
	if err := snapshot.Write(steps.SnapshotFile(h), snapshot.Header{Model: steps.SnapshotModel, Version: "0/old", Seq: 800}, []byte{0x80}); err != nil {
		t.Fatal(err)
	}
	if got, _ := readModelsNeed(ctx, h, ms, idx); got != 1 {
		t.Fatalf("untrusted steps snapshot: %d, want 1", got)
	}
	writeSnaps(t, h, 700)
	b, _ := os.ReadFile(retention.SnapshotFile(h))
	b[len(b)-1] ^= 1
	os.WriteFile(retention.SnapshotFile(h), b, 0o600)
	if got, _ := readModelsNeed(ctx, h, ms, idx); got != 1 {
		t.Fatalf("garbled retention snapshot: %d, want 1", got)
	}
}

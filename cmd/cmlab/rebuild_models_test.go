package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
)

// TestRebuildLeavesReadModels: an in-place `cmlab rebuild` of a home with
// no read model state (as after an upgrade) leaves the Lab store and the
// step and retention snapshots covering the whole log, so the next start
// does not read it all again (issue 26 item 3).
func TestRebuildLeavesReadModels(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Options{Home: h, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range projections.Workload(projections.WorkloadEveryType, 4, 600) {
		if _, err := e.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	last := e.Log().LastSeq()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(h.StateDir(), "snapshots"))
	os.Remove(labapi.LabStoreFile(h))
	if code, out, errs := cli(t, "rebuild", "--home", h.Dir); code != 0 {
		t.Fatalf("rebuild: %d %s %s", code, out, errs)
	}
	if c, err := labapi.LabStoreCovers(h); err != nil || c < last {
		t.Fatalf("Lab store after rebuild: covers %d (log %d), %v", c, last, err)
	}
	if c, err := steps.SnapshotKind.Covers(steps.SnapshotFile(h)); err != nil || c < last {
		t.Fatalf("step snapshot after rebuild: covers %d (log %d), %v", c, last, err)
	}
	if c, err := retention.Kind.Covers(retention.SnapshotFile(h)); err != nil || c < last {
		t.Fatalf("retention snapshot after rebuild: covers %d (log %d), %v", c, last, err)
	}
}

// TestReplayIntoLeavesReadModels: `cmlab replay --to SEQ --into DIR`
// leaves in DIR the Lab store and the step and retention snapshots
// covering the replayed log, as rebuild and restore do, so serving the
// replayed home does not read it all again (issue 26 item 3); and it
// appends nothing to the replayed history.
func TestReplayIntoLeavesReadModels(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Options{Home: h, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range projections.Workload(projections.WorkloadEveryType, 5, 600) {
		if _, err := e.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	to := e.Log().LastSeq() - 50
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	into := home.Home{Dir: filepath.Join(t.TempDir(), "past")}
	if code, out, errs := cli(t, "replay", "--home", h.Dir, "--to", strconv.FormatUint(to, 10), "--into", into.Dir); code != 0 {
		t.Fatalf("replay --into: %d %s %s", code, out, errs)
	}
	if c, err := labapi.LabStoreCovers(into); err != nil || c != to {
		t.Fatalf("Lab store after replay --into: covers %d (replayed to %d), %v", c, to, err)
	}
	if c, err := steps.SnapshotKind.Covers(steps.SnapshotFile(into)); err != nil || c != to {
		t.Fatalf("step snapshot after replay --into: covers %d (replayed to %d), %v", c, to, err)
	}
	if c, err := retention.Kind.Covers(retention.SnapshotFile(into)); err != nil || c != to {
		t.Fatalf("retention snapshot after replay --into: covers %d (replayed to %d), %v", c, to, err)
	}
	r, err := wal.OpenReader(into.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	if last, err := r.LastSeq(); err != nil || last != to {
		t.Fatalf("the replayed log ends at %d (replayed to %d), %v: something was appended", last, to, err)
	}
}

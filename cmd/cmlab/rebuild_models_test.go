package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
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

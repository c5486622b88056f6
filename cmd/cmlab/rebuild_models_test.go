package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
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

// TestStartAfterRebuildReadsNoHistory: after an in-place `cmlab rebuild`
// of a home left with nothing but its log (as after an upgrade or a
// restore), every read model a daemon opens finds its snapshot or store
// covering the whole log, the terminal's too (issue 26 item 3), so no
// read model reads the history again: the bytes the start reads
// (/proc/self/io rchar) stay under twice the log's size. (One read of
// about the log's size is the engine's own at open, not a read model's;
// without the terminal snapshot the terminal model and start-up recovery
// each read the whole log too: 3.4 times its size.) A log that leaves a terminal block or
// shell open gets no terminal snapshot from a rebuild (closing them
// appends events, the daemon's start-up recovery's to do), and the
// rebuild appends nothing.
func TestStartAfterRebuildReadsNoHistory(t *testing.T) {
	ctx := context.Background()
	build := func(t *testing.T, kind int) (home.Home, uint64) {
		h := home.Home{Dir: t.TempDir()}
		e, err := engine.Open(ctx, engine.Options{Home: h, NoSync: true, SegmentSize: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for ev := range projections.Workload(kind, 9, 3000) {
			if _, err := e.Append(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
		last := e.Log().LastSeq()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(h.StateDir())
		if code, out, errs := cli(t, "rebuild", "--home", h.Dir); code != 0 {
			t.Fatalf("rebuild: %d %s %s", code, out, errs)
		}
		return h, last
	}

	t.Run("terminal closed", func(t *testing.T) {
		if _, err := readBytes(); err != nil {
			t.Skipf("no /proc/self/io: %v", err)
		}
		h, last := build(t, projections.WorkloadMixedLab)
		covers := map[string]func(home.Home) (uint64, error){
			"Lab store": labapi.LabStoreCovers,
			"steps":     func(h home.Home) (uint64, error) { return steps.SnapshotKind.Covers(steps.SnapshotFile(h)) },
			"retention": func(h home.Home) (uint64, error) { return retention.Kind.Covers(retention.SnapshotFile(h)) },
			"terminal":  pty.SnapshotCovers,
		}
		for name, c := range covers {
			if seq, err := c(h); err != nil || seq != last {
				t.Errorf("%s after rebuild: covers %d (log %d), %v", name, seq, last, err)
			}
		}
		var logBytes int64
		ents, err := os.ReadDir(h.WALDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				logBytes += fi.Size()
			}
		}
		var logs bytes.Buffer
		before, _ := readBytes()
		dh, err := daemon.Open(ctx, daemon.Options{Home: h, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		after, _ := readBytes()
		if err != nil {
			t.Fatalf("start after rebuild: %v\n%s", err, logs.String())
		}
		if err := dh.Close(); err != nil {
			t.Fatal(err)
		}
		if read := after - before; read >= 2*logBytes {
			t.Errorf("the start after rebuild read %d bytes, the log holds %d: a read model read the history again", read, logBytes)
		}
		for _, w := range []string{"rebuilt", "ignored", "regenerated"} {
			if strings.Contains(logs.String(), w) {
				t.Errorf("start after rebuild logged %q:\n%s", w, logs.String())
			}
		}
		// replay --into (and restore) leave the terminal's snapshot
		// through the same one-shot open.
		into := home.Home{Dir: filepath.Join(t.TempDir(), "past")}
		if code, out, errs := cli(t, "replay", "--home", h.Dir, "--to", strconv.FormatUint(last-10, 10), "--into", into.Dir); code != 0 {
			t.Fatalf("replay --into: %d %s %s", code, out, errs)
		}
		if seq, err := pty.SnapshotCovers(into); err != nil || seq != last-10 {
			t.Fatalf("terminal snapshot after replay --into: covers %d (replayed to %d), %v", seq, last-10, err)
		}
	})

	t.Run("terminal left open", func(t *testing.T) {
		h, last := build(t, projections.WorkloadEveryType)
		r, err := wal.OpenReader(h.WALDir())
		if err != nil {
			t.Fatal(err)
		}
		left, err := pty.ScanLeftOpen(r.Events(1))
		if err != nil || len(left.Blocks)+len(left.Shells) == 0 {
			t.Fatalf("the workload leaves nothing open (%v): the case tests nothing", err)
		}
		if seq, err := r.LastSeq(); err != nil || seq != last {
			t.Fatalf("the log ends at %d after rebuild (%d before), %v: something was appended", seq, last, err)
		}
		if _, err := os.Stat(pty.SnapshotFile(h)); !os.IsNotExist(err) {
			t.Fatalf("terminal snapshot written over a log leaving blocks open: %v", err)
		}
	})
}

// readBytes is the bytes this process has read through read system calls
// (rchar of /proc/self/io; the page cache does not hide them).
func readBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no rchar in /proc/self/io")
}

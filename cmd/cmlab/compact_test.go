package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/steps"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/wal"
)

// compactHome builds a home of 1 KiB segments whose 120 events are three
// hours old (outside the auto-resume window): 20 mandates planned and
// completed (seq 1–40, projected into steps/steps.jsonl) and 80 fillers.
func compactHome(t *testing.T) string {
	t.Helper()
	h := home.Home{Dir: privateDir(t)}
	old := func() time.Time { return time.Now().Add(-3 * time.Hour) }
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 1024, Now: old})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 {
		m := fmt.Sprintf("m%d", i)
		for _, p := range []events.Payload{
			&events.StepPlanned{MandateID: m, Steps: []events.PlannedStep{{StepID: "s1", Tool: "sh", ParamsHash: "sha256-1", IdemKey: m + "-k"}}},
			&events.StepCompleted{MandateID: m, StepID: "s1", PostHash: "sha256-p", ResultHash: "sha256-r"},
		} {
			if _, err := eng.Append(ctx, events.MustNew(m, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 80 {
		if _, err := eng.Append(ctx, events.MustNew("filler", &events.WalSalvaged{LostSeq: uint64(i), Reason: strings.Repeat("f", 50)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return h.Dir
}

func TestCompactCLIArchiveKeepsEveryReaderWorking(t *testing.T) {
	h := compactHome(t)
	archive := filepath.Join(t.TempDir(), "archive")
	code, out, errs := walCLI(t, "--home", h, "compact", "--dry-run")
	if code != 0 || !strings.Contains(out, "nothing to remove") || !strings.Contains(out, "the read models' snapshots do not cover it yet") {
		t.Fatalf("compact --dry-run without an archive: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = walCLI(t, "--home", h, "--json", "compact", "--archive", archive)
	if code != 0 {
		t.Fatalf("compact: exit %d: %s", code, errs)
	}
	var rep compact.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// The checkpoint covers every event; nothing else holds: all but the tail goes.
	segs, _ := wal.Segments(filepath.Join(h, "wal"))
	if len(rep.Segments) == 0 || rep.Before != 121 || rep.NewFirstSeq != segs[0].First || len(segs) != 1 || rep.HeldBy != "checkpoint" {
		t.Fatalf("report: %+v", rep)
	}
	first := rep.NewFirstSeq

	code, out, errs = walCLI(t, "--home", h, "wal", "verify")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("compacted: the log starts at seq %d", first)) || !strings.Contains(out, "archived to "+archive) {
		t.Fatalf("wal verify: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = walCLI(t, "--home", h, "wal", "dump", "--from", "1", "--to", "3")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, `"seq":1,`) {
		t.Fatalf("wal dump of archived seqs: exit %d\n%s", code, out)
	}
	code, out, errs = walCLI(t, "--home", h, "rebuild", "--check")
	if code != 0 {
		t.Fatalf("rebuild --check on a compacted log: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = walCLI(t, "--home", h, "trace", "m3")
	if code != 0 || !strings.Contains(out, "step.planned") {
		t.Fatalf("trace of an archived mandate: exit %d\n%s%s", code, out, errs)
	}
	into := filepath.Join(t.TempDir(), "at10")
	if code, out, errs = walCLI(t, "--home", h, "replay", "--to", "10", "--into", into); code != 0 {
		t.Fatalf("replay --to 10: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = walCLI(t, "--home", h, "--json", "status")
	var st struct {
		Compaction compactionStatus `json:"compaction"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status: %v\n%s%s", err, out, errs)
	}
	if c := st.Compaction; c.FirstRetainedSeq != first || c.LastCompaction == "" || c.ReclaimableBytes != 0 || c.LogBytes <= 0 || c.Error != "" {
		t.Fatalf("status compaction: %+v", c)
	}

	// The archive moved: readers say how to get it back; --archive finds it.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(archive, moved); err != nil {
		t.Fatal(err)
	}
	code, _, errs = walCLI(t, "--home", h, "wal", "dump", "--from", "1")
	if code != exitError || !strings.Contains(errs, "restore the archive") || !strings.Contains(errs, "before the first retained seq") {
		t.Fatalf("dump with the archive gone: exit %d\n%s", code, errs)
	}
	code, _, errs = walCLI(t, "--home", h, "replay", "--check")
	if code != exitError || !strings.Contains(errs, "restore the archive") {
		t.Fatalf("replay --check with the archive gone: exit %d\n%s", code, errs)
	}
	if code, _, errs = walCLI(t, "--home", h, "replay", "--check", "--archive", moved); code != 0 {
		t.Fatalf("replay --check --archive: exit %d\n%s", code, errs)
	}
	for _, args := range [][]string{
		{"trace", "m3"},
		{"replay", "--to", "10", "--into", filepath.Join(t.TempDir(), "r")},
		{"rebuild", "--into", filepath.Join(t.TempDir(), "b")},
	} {
		code, _, errs = walCLI(t, append([]string{"--home", h}, args...)...)
		if code != exitError || !strings.Contains(errs, "restore the archive") {
			t.Fatalf("%v with the archive gone: exit %d\n%s", args, code, errs)
		}
		args[len(args)-1] += "2"
		if args[0] == "trace" {
			args[len(args)-1] = "m3"
		}
		if code, _, errs = walCLI(t, append([]string{"--home", h, "--archive", moved}, args...)...); code != 0 {
			t.Fatalf("%v --archive: exit %d\n%s", args, code, errs)
		}
	}
	if code, out, errs = walCLI(t, "--home", h, "wal", "dump", "--from", "1", "--archive", moved); code != 0 || strings.Count(out, "\n") != 120 {
		t.Fatalf("dump --archive: exit %d (%d lines)\n%s", code, strings.Count(out, "\n"), errs)
	}
	// Reading from the first retained seq needs no archive.
	if code, _, errs = walCLI(t, "--home", h, "wal", "dump", "--from", fmt.Sprint(first)); code != 0 {
		t.Fatalf("dump from the first retained seq: exit %d\n%s", code, errs)
	}
}

func TestCompactCLIManifestPastTheLogIsCorruption(t *testing.T) {
	h := compactHome(t)
	dir := filepath.Join(h, "wal")
	if code, _, errs := walCLI(t, "--home", h, "compact", "--archive", filepath.Join(t.TempDir(), "a")); code != 0 {
		t.Fatal(errs)
	}
	m, err := wal.ReadManifest(dir)
	if err != nil || m == nil {
		t.Fatal(m, err)
	}
	// Remove the retained head: the manifest now points at a missing segment.
	segs, _ := wal.Segments(dir)
	if err := os.Remove(filepath.Join(dir, segs[0].Name)); err != nil {
		t.Fatal(err)
	}
	code, out, errs := walCLI(t, "--home", h, "wal", "verify")
	if code != exitCorrupt || !strings.Contains(out+errs, segs[0].Name) {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = walCLI(t, "--home", h, "wal", "dump", "--from", fmt.Sprint(m.FirstSeq))
	if code != exitCorrupt || !strings.Contains(errs, segs[0].Name) {
		t.Fatalf("dump: exit %d\n%s", code, errs)
	}
}

func TestCompactCLIUsage(t *testing.T) {
	h := t.TempDir()
	for _, args := range [][]string{
		{"compact", "--keep-days", "1", "--keep-bytes", "1"},
		{"compact", "--keep-days", "-1"},
		{"serve", "--compact-keep-days", "1", "--compact-keep-bytes", "5"},
		{"serve", "--compact-every", "0s", "--compact-archive", "x"},
	} {
		if code, _, errs := walCLI(t, append([]string{"--home", h}, args...)...); code != exitUsage {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
	}
}

func TestDaemonCompactionPolicyAndRestartOnACompactedLog(t *testing.T) {
	h := compactHome(t)
	hh := home.Home{Dir: h}
	archive := filepath.Join(t.TempDir(), "archive")
	start := func(policy *compact.Options) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan labapi.DaemonInfo, 1)
		exited := make(chan error, 1)
		go func() {
			exited <- daemon.Run(ctx, daemon.Options{Home: hh, Listen: "127.0.0.1:0", Compaction: policy, CompactEvery: 20 * time.Millisecond,
				Ready: func(info labapi.DaemonInfo) { ready <- info }})
		}()
		select {
		case <-ready:
		case err := <-exited:
			cancel()
			t.Fatalf("cmlab serve: %v", err)
		case <-time.After(60 * time.Second):
			cancel()
			t.Fatal("cmlab serve did not start")
		}
		return func() {
			cancel()
			if err := <-exited; err != nil {
				t.Errorf("cmlab serve: %v", err)
			}
		}
	}
	stop := start(&compact.Options{Archive: archive})
	// The policy runs in the daemon: wait for its first compaction.
	deadline := time.Now().Add(20 * time.Second)
	var m *wal.Manifest
	for time.Now().Before(deadline) {
		if m, _ = wal.ReadManifest(hh.WALDir()); m != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m == nil || m.FirstSeq <= 40 || m.Removed[0].Archive != archive {
		t.Fatalf("the daemon's policy did not compact: %+v", m)
	}
	// Beside the daemon: a dry run plans, a compaction is refused.
	if code, out, errs := walCLI(t, "--home", h, "compact", "--dry-run", "--archive", archive); code != 0 || !strings.Contains(out, "oldest seq still needed") {
		t.Fatalf("dry run beside the daemon: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := walCLI(t, "--home", h, "compact", "--archive", archive); code != exitError || !strings.Contains(errs, "a daemon holds the log") {
		t.Fatalf("compact beside the daemon: exit %d\n%s", code, errs)
	}
	stop()
	// A restart replays the whole history into its read models, the
	// archived part from the archive.
	stop = start(nil)
	stop()
	if code, out, errs := walCLI(t, "--home", h, "wal", "verify"); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	// Without its archive the daemon refuses to start (issue 27: no
	// command exits 0 while history is missing), naming the fix.
	if err := os.Rename(archive, archive+".gone"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	err := daemon.Run(ctx, daemon.Options{Home: hh, Listen: "127.0.0.1:0",
		Ready: func(labapi.DaemonInfo) {
			t.Error("the daemon started without its archive")
			cancel()
		}})
	cancel()
	if !errors.Is(err, wal.ErrArchive) || !strings.Contains(err.Error(), "restore the archive") {
		t.Fatalf("daemon start without the archive: %v", err)
	}
	if err := os.Rename(archive+".gone", archive); err != nil {
		t.Fatal(err)
	}
	// With it, the daemon restarts from its read models' snapshots (issue
	// 16): nothing before them is read. A byte flipped in every archived
	// segment, size and mtime kept, would fail any read of them; the
	// check at open stats them as an earlier open recorded them.
	ents, _ := os.ReadDir(archive)
	orig := map[string][]byte{}
	for _, e := range ents {
		p := filepath.Join(archive, e.Name())
		if len(e.Name()) != 20 {
			continue
		}
		fi, _ := os.Stat(p)
		b, _ := os.ReadFile(p)
		orig[p] = append([]byte(nil), b...)
		b[len(b)/2] ^= 0x5a
		os.WriteFile(p, b, 0o600)
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
	}
	if len(orig) == 0 {
		t.Fatal("no archived segment")
	}
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	started := false
	err = daemon.Run(ctx, daemon.Options{Home: hh, Listen: "127.0.0.1:0",
		Ready: func(labapi.DaemonInfo) { started = true; cancel() }})
	cancel()
	if err != nil || !started {
		t.Fatalf("daemon start from its snapshots: started %v, %v", started, err)
	}
	for p, b := range orig {
		fi, _ := os.Stat(p)
		os.WriteFile(p, b, 0o600)
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
	}
	// A read model without a snapshot needs the whole history: without
	// the archive the daemon cannot rebuild it, and says why.
	if err := os.Remove(steps.SnapshotFile(hh)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(archive, archive+".gone"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = daemon.Run(ctx, daemon.Options{Home: hh, Listen: "127.0.0.1:0",
		Ready: func(labapi.DaemonInfo) {
			t.Error("the daemon started without its archive or a step snapshot")
			cancel()
		}})
	if !errors.Is(err, wal.ErrArchive) || !strings.Contains(err.Error(), "restore the archive") {
		t.Fatalf("daemon start without the archive: %v", err)
	}
}

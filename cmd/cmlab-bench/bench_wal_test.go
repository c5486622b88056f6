package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bench wal reports, for every multi-appender row, p99 ack over the run's
// own p99 group fsync (the tail target's column) and the decomposition of
// the acknowledgements by stage; the stall probe runs raw and presized.
func TestBenchWalTailColumns(t *testing.T) {
	args := []string{"wal", "--repeat", "1", "--n", "512", "--baseline-n", "16", "--appenders", "4", "--batch", "16", "--segment-size", "65536", "--dir", t.TempDir()}
	code, out, errs := walCLI(t, append([]string{"--json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res benchWalResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	want := []string{"encode", "wait for group", "seal", "write", "wait for fsync", "fsync", "apply+answer", "wake-up", "total"}
	for _, r := range res.Rows[1:] {
		if r.FsyncP99Ms <= 0 || math.Abs(r.P99OverFsyncP99-r.P99Ms/r.FsyncP99Ms) > 1e-9 {
			t.Fatalf("row %s: p99 %v fsync p99 %v ratio %v", r.Name, r.P99Ms, r.FsyncP99Ms, r.P99OverFsyncP99)
		}
		if len(r.Stages) != len(want) {
			t.Fatalf("row %s: stages %+v", r.Name, r.Stages)
		}
		var tail float64
		for i, s := range r.Stages {
			if s.Name != want[i] || s.P50Ms < 0 || s.P99Ms < s.P50Ms || s.TailMean < 0 {
				t.Fatalf("row %s: stage %d %+v, want %q", r.Name, i, s, want[i])
			}
			if s.Name != "total" {
				tail += s.TailMean
			}
		}
		// The stages of the slowest acks add up to their mean latency,
		// which is at least the p99 of all acks measured inside Append.
		total := r.Stages[len(r.Stages)-1]
		if math.Abs(tail-total.TailMean) > 1e-6*math.Max(1, total.TailMean) || total.TailMean < total.P99Ms || total.P99Ms <= 0 || r.Stages[5].P50Ms <= 0 {
			t.Fatalf("row %s: stage tail means sum to %v, total %+v, fsync %+v", r.Name, tail, total, r.Stages[5])
		}
	}
	p := res.StallProbe
	if p == nil || p.Presized == nil || p.Presized.Calls != p.Calls || p.Presized.SegmentSize != 65536 || p.Presized.P50Ms <= 0 {
		t.Fatalf("stall probe %+v", p)
	}
	code, out, errs = walCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, s := range []string{"p99/fsync p99", "ack latency by stage", "wait for fsync", "tail buffers sized ahead"} {
		if !strings.Contains(out, s) {
			t.Fatalf("output lacks %q:\n%s", s, out)
		}
	}
}

func TestBenchWalSmoke(t *testing.T) {
	code, out, errs := walCLI(t, "--json", "wal", "--n", "256", "--baseline-n", "32", "--appenders", "1,4", "--batch", "64", "--segment-size", "65536", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res benchWalResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 || res.EntryBytes < 190 || res.EntryBytes > 210 || res.PerEntryPerSec <= 0 {
		t.Fatalf("result %+v", res)
	}
	for _, r := range res.Rows[1:] {
		if r.Events != 256 || r.PerSec <= 0 || r.CeilingPerSec <= 0 || r.AvgGroup < 1 || r.P99OverBaseFsync <= 0 ||
			r.FsyncP50Ms <= 0 || r.FsyncP99Ms < r.FsyncP50Ms ||
			math.Abs(r.MeanAckMs-1000*float64(r.Appenders)/r.PerSec) > 1e-9 {
			t.Fatalf("row %+v", r)
		}
	}
	if p := res.SyncProbe; p == nil || p.N != 32 || p.ChunkBytes != 32*res.EntryBytes || p.AppendP50 <= 0 || p.ZerosP50 <= 0 {
		t.Fatalf("sync probe %+v", res.SyncProbe)
	}
	if p := res.StallProbe; p == nil || p.Calls != 8 || p.Batch != 32 || p.SegmentSize != 65536 || p.P50Ms <= 0 || p.MaxMs < p.P99Ms {
		t.Fatalf("stall probe %+v", res.StallProbe)
	}
	code, _, errs = walCLI(t, "wal", "--segment-size", "65535")
	if code != 2 || !strings.Contains(errs, "--segment-size must be at least 65536 bytes") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// Counts that cannot make a measurement are usage errors, refused before
// any fsync work (they panicked or ended in a JSON error of +Inf).
func TestBenchWalBadCounts(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--baseline-n", "-1"}, "--baseline-n ≥ 1 are required"},
		{[]string{"--baseline-n", "0"}, "--baseline-n ≥ 1 are required"},
		{[]string{"--n", "4", "--appenders", "1,8"}, "--n 4 is fewer events than --appenders 8: every appender needs at least one"},
	} {
		dir := t.TempDir()
		args := append([]string{"--json", "wal", "--repeat", "1", "--n", "64", "--baseline-n", "8", "--appenders", "1", "--batch", "8", "--dir", dir}, c.args...)
		code, out, errs := walCLI(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", c.args, code, out, errs)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Fatalf("%v: --dir holds %d entries (%v), want none", c.args, len(ents), err)
		}
	}
}

// Two runs into one --dir each get a new directory (the second used to
// append to the first's logs and fail with "out of order"), removed
// afterwards unless --keep.
func TestBenchWalDirTwice(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--json", "wal", "--repeat", "1", "--segment-size", "65536", "--n", "64", "--baseline-n", "8", "--appenders", "1", "--batch", "8", "--dir", dir}
	var kept []string
	for i, extra := range [][]string{{"--keep"}, {"--keep"}, nil} {
		code, out, errs := walCLI(t, append(args, extra...)...)
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errs)
		}
		var res benchWalResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(res.Dir) != dir || slices.Contains(kept, res.Dir) {
			t.Fatalf("run %d: dir %q (earlier: %q)", i, res.Dir, kept)
		}
		kept = append(kept, res.Dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, filepath.Join(dir, e.Name()))
	}
	if !slices.Equal(names, kept[:2]) && !slices.Equal(names, []string{kept[1], kept[0]}) {
		t.Fatalf("--dir holds %q, want the two kept runs %q", names, kept[:2])
	}
}

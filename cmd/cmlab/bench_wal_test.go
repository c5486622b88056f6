package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// bench wal reports, for every multi-appender row, p99 ack over the run's
// own p99 group fsync (the tail target's column) and the decomposition of
// the acknowledgements by stage; the stall probe runs raw and presized.
func TestBenchWalTailColumns(t *testing.T) {
	args := []string{"bench", "wal", "--repeat", "1", "--n", "512", "--baseline-n", "16", "--appenders", "4", "--batch", "16", "--segment-size", "65536", "--dir", t.TempDir()}
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

package console

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// BenchmarkLogPage measures one page of the console's log on a large log
// (issue 30: ≤ 100 ms on a 10M-event home). The log is the mixed Lab
// workload, CMLAB_BENCH_CONSOLE_EVENTS events (default 10,000,000),
// written once into CMLAB_BENCH_CONSOLE_DIR (default a temporary
// directory; set it to keep the log between runs):
//
//	CMLAB_BENCH_CONSOLE_DIR=/tmp/console-10m go test ./console -run '^$' -bench LogPage -benchtime 20x
//
// Each sub-benchmark reports ms/page: the newest page, a page in the
// middle (a jump to a seq), a page filtered by a type prefix the log
// holds often, and one no event matches (it stops at its budget).
func BenchmarkLogPage(b *testing.B) {
	n := 10_000_000
	if s := os.Getenv("CMLAB_BENCH_CONSOLE_EVENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	dir := os.Getenv("CMLAB_BENCH_CONSOLE_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	walDir := filepath.Join(dir, "wal")
	last := benchLog(b, walDir, n)
	cases := []struct {
		name string
		q    LogQuery
	}{
		{"newest", LogQuery{}},
		{"seq-middle", LogQuery{Before: last / 2}},
		{"type-feedback", LogQuery{TypePrefix: "feedback."}},
		{"type-none", LogQuery{TypePrefix: "no.such."}},
		{"id-rare", LogQuery{IDs: []string{"exp_none"}, Before: last / 2}},
	}
	lr := NewLogReader(walDir)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var worst time.Duration
			cpu0 := cpuTime()
			for b.Loop() {
				t0 := time.Now()
				p, err := lr.Page(context.Background(), 1, last, c.q)
				if err != nil {
					b.Fatal(err)
				}
				if c.name != "type-none" && c.name != "id-rare" && len(p.Events) == 0 {
					b.Fatal("empty page")
				}
				worst = max(worst, time.Since(t0))
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
			// CPU time is what a page costs when the machine is shared:
			// wall time there is mostly waiting for a core.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/page")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchLog writes n events of the mixed workload into dir unless it
// already holds them, and returns the last seq.
func benchLog(b *testing.B, dir string, n int) uint64 {
	b.Helper()
	if r, err := wal.OpenReader(dir); err == nil {
		if last, err := r.LastSeq(); err == nil && last >= uint64(n) {
			return last
		}
	}
	l, err := wal.Open(wal.Options{Dir: dir, QuarantineDir: filepath.Join(filepath.Dir(dir), "quarantine"), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]*events.Event, 0, 4096)
	for ev := range projections.Workload(projections.WorkloadMixedLab, 1, n) {
		batch = append(batch, ev)
		if len(batch) == cap(batch) {
			if _, err := l.Append(context.Background(), batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if _, err := l.Append(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	last := l.LastSeq()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return last
}

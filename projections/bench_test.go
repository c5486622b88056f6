package projections

import (
	"context"
	"runtime/pprof"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// BenchmarkRebuildMixedLab measures projecting mixed Lab events (decode,
// render, write) from memory, without the log read. The workload is
// generated before the timer starts; the rebuild itself runs under the
// pprof label phase=rebuild, so a profile of just the measured part is
// `go tool pprof -tagfocus phase=rebuild cpu.out` (the generator and the
// testing framework fall outside the label).
func BenchmarkRebuildMixedLab(b *testing.B) {
	var evs []*events.Event
	seq := uint64(0)
	for ev := range Workload(WorkloadMixedLab, 1, 50000) {
		seq++
		ev.Seq = seq
		evs = append(evs, ev)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src := func(yield func(*events.Event, error) bool) {
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
		}
		dir := b.TempDir()
		var err error
		pprof.Do(context.Background(), pprof.Labels("phase", "rebuild"), func(ctx context.Context) {
			_, err = Rebuild(ctx, src, home.Home{Dir: dir}, RebuildOptions{NoSync: true})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
}

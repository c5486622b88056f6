package projections

import (
	"context"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// BenchmarkRebuildMixedLab measures projecting mixed Lab events (decode,
// render, write) from memory, without the log read.
func BenchmarkRebuildMixedLab(b *testing.B) {
	var evs []*events.Event
	seq := uint64(0)
	for ev := range Workload(WorkloadMixedLab, 1, 50000) {
		seq++
		ev.Seq = seq
		evs = append(evs, ev)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src := func(yield func(*events.Event, error) bool) {
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
		}
		if _, err := Rebuild(context.Background(), src, home.Home{Dir: b.TempDir()}, RebuildOptions{NoSync: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
}

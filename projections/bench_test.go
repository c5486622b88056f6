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

// BenchmarkOpenChecksViews measures Open of a home whose checkpoint covers
// 200,000 mixed Lab events' views: with crcs every view is read whole and
// checksummed (the cost a daemon start pays for catching damage anywhere),
// "tails only" is the same checkpoint without crcs, "crcs deferred" the
// daemon's open (DeferWholeCheck: tails now, VerifyViews after start). Reported as MB/s of
// view bytes checked.
func BenchmarkOpenChecksViews(b *testing.B) {
	src := workloadSrc(WorkloadMixedLab, 1, 200000)
	h := home.Home{Dir: b.TempDir()}
	if _, err := Rebuild(context.Background(), src, h, RebuildOptions{NoSync: true}); err != nil {
		b.Fatal(err)
	}
	cp, err := ReadCheckpoint(h)
	if err != nil || cp == nil {
		b.Fatal(err)
	}
	var total int64
	for _, n := range cp.Views {
		total += n
	}
	tailsOnly := *cp
	tailsOnly.CRCs = nil
	for _, bc := range []struct {
		name     string
		cp       Checkpoint
		deferred bool
	}{{"crcs", *cp, false}, {"tails only", tailsOnly, false}, {"crcs deferred", *cp, true}} {
		b.Run(bc.name, func(b *testing.B) {
			c := bc.cp
			if err := writeCheckpoint(h, &c, true); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(total)
			for i := 0; i < b.N; i++ {
				p, err := Open(Options{Home: h, NoSync: true, DeferWholeCheck: bc.deferred})
				if err != nil || p.ReplayFrom() != cp.Seq+1 {
					b.Fatalf("open: %v, replay from %d", err, p.ReplayFrom())
				}
				p.CloseNoCheckpoint()
			}
		})
	}
}

package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
)

// benchHome appends n workload events to a new home in batches of 256.
func benchHome(b *testing.B, n int) home.Home {
	b.Helper()
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(b.TempDir(), "live")}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	evs := cloneEvents(workload(t, 1, n))
	for i := 0; i < len(evs); i += 256 {
		if _, err := eng.Append(ctx, evs[i:min(i+256, len(evs))]...); err != nil {
			b.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkCheck measures replay --check (re-project and compare) of an
// identical home; events/s is reported.
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := benchHome(b, n)
			b.ResetTimer()
			for b.Loop() {
				rep, err := Check(context.Background(), CheckOptions{Home: h, Shadow: b.TempDir()})
				if err != nil || !rep.Identical {
					b.Fatalf("%v %+v", err, rep)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkTo measures replay --to the last event (views plus log copy).
func BenchmarkTo(b *testing.B) {
	const n = 50000
	h := benchHome(b, n)
	b.ResetTimer()
	for b.Loop() {
		if _, err := To(context.Background(), ToOptions{Src: h, Into: home.Home{Dir: filepath.Join(b.TempDir(), "to")}, UpTo: n}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

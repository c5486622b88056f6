package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
)

// BenchmarkFeedbackAppend32 is the engine's share of `cmlab bench api`:
// 32 goroutines each appending one feedback event at a time, every append
// acknowledged after the fsync and projection of its group, without HTTP.
// It reports events/s and the process's CPU µs per event (steadier on a
// shared machine).
//
//	go test -run '^$' -bench FeedbackAppend32 -benchtime 20000x ./engine
func BenchmarkFeedbackAppend32(b *testing.B) {
	h := home.Home{Dir: b.TempDir()}
	e, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	var n atomic.Int64
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((32 + procs - 1) / procs) // RunParallel starts parallelism × GOMAXPROCS goroutines
	cpu0, st0 := processCPUTime(), e.Log().Stats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Append(context.Background(), feedbackEvent(fmt.Sprintf("fb_%d", n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((processCPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/event")
	if st := e.Log().Stats(); st.Groups > st0.Groups {
		b.ReportMetric(float64(st.Appends-st0.Appends)/float64(st.Groups-st0.Groups), "events/fsync")
		// The share of the run the log spent in fsync: near 100% the path
		// waits for the disk, and no overlap of other stages can help.
		b.ReportMetric(100*(st.FsyncSeconds.Sum-st0.FsyncSeconds.Sum)/b.Elapsed().Seconds(), "fsync-%")
	}
}

func processCPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package wal

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	twal "github.com/tidwall/wal"
)

// Benchmarks of the real, fsynced path. `cmlab bench wal` compares them
// with raw tidwall/wal baselines; these are for profiling.

func BenchmarkAppendBatch256(b *testing.B) {
	l, err := Open(Options{Dir: filepath.Join(b.TempDir(), "wal")})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	evs := make([]*events.Event, 256)
	for i := range evs {
		evs[i] = testEvent(i)
	}
	b.SetBytes(int64(len(evs)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, ev := range evs {
			ev.TS = 0
		}
		if _, err := l.Append(context.Background(), evs...); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendParallel(b *testing.B) {
	benchAppendParallel(b, Options{Dir: filepath.Join(b.TempDir(), "wal")})
}

// benchAppendParallel appends with 64 goroutines on 2 cores.
func benchAppendParallel(b *testing.B, opts Options) {
	l, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		ev := testEvent(1)
		for pb.Next() {
			ev.TS = 0
			if _, err := l.Append(context.Background(), ev); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEncodeEntry(b *testing.B) {
	ev := testEvent(1)
	for i := 0; i < b.N; i++ {
		if _, err := encodeUnsequenced(ev, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendSerial(b *testing.B) {
	l, err := Open(Options{Dir: filepath.Join(b.TempDir(), "wal")})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ev := testEvent(1)
	for i := 0; i < b.N; i++ {
		ev.TS = 0
		if _, err := l.Append(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawWriteSync is tidwall/wal Write with an fsync per entry, the
// baseline BenchmarkAppendSerial is compared with.
func BenchmarkRawWriteSync(b *testing.B) {
	tw, err := twal.Open(filepath.Join(b.TempDir(), "raw"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tw.Close()
	entry := entryOf(b, testEvent(1))
	for i := 0; i < b.N; i++ {
		if err := tw.Write(uint64(i+1), entry); err != nil {
			b.Fatal(err)
		}
	}
}

func entryOf(b *testing.B, ev *events.Event) []byte {
	e, err := EncodeEntry(ev)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkEvents measures sequential reading (what a rebuild does): the
// reported events/s must stay well above 300k.
func BenchmarkEvents(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "wal")
	l, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const n = 100_000
	batch := make([]*events.Event, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, testEvent(i))
		if len(batch) == cap(batch) {
			if _, err := l.Append(context.Background(), batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		c := 0
		for _, err := range l.Events(1) {
			if err != nil {
				b.Fatal(err)
			}
			c++
		}
		if c != n {
			b.Fatalf("%d events", c)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkAppendParallelNoSync is the CPU cost of the pipeline itself:
// 64 appenders, no fsync.
func BenchmarkAppendParallelNoSync(b *testing.B) {
	benchAppendParallel(b, Options{Dir: filepath.Join(b.TempDir(), "wal"), NoSync: true})
}

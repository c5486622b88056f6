package wal

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
		if _, err := encodeUnsequenced(ev); err != nil {
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

// flatWriter is a Writer without tidwall/wal: one pwrite per group into a
// file zero-filled beforehand, then fdatasync. BenchmarkAppend64Flat runs
// the log's pipeline over it, to tell the pipeline's own latency from
// what tidwall's in-memory tail buffer adds (BenchmarkAppend64).
type flatWriter struct {
	f   *os.File
	off int64
	buf []byte
}

func (w *flatWriter) WriteBatch(_ uint64, entries [][]byte) (bool, error) {
	w.buf = w.buf[:0]
	for _, e := range entries {
		w.buf = binary.AppendUvarint(w.buf, uint64(len(e)))
		w.buf = append(w.buf, e...)
	}
	_, err := w.f.WriteAt(w.buf, w.off)
	w.off += int64(len(w.buf))
	return false, err
}
func (w *flatWriter) Sync() error    { return datasync(w.f) }
func (w *flatWriter) SyncDir() error { return nil }

func BenchmarkAppend64(b *testing.B)     { bench64(b, false) }
func BenchmarkAppend64Flat(b *testing.B) { bench64(b, true) }

// bench64 appends b.N events of ~200 bytes with 64 goroutines and reports
// the p50 and p99 acknowledgement latency.
func bench64(b *testing.B, flat bool) {
	dir := b.TempDir()
	l, err := Open(Options{Dir: filepath.Join(dir, "wal")})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if flat {
		path := filepath.Join(dir, "flat")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		if err := zeroFill(path, 0, alignUp(int64(b.N)*300+1, preallocUnit)); err != nil {
			b.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		orig := l.w
		l.w = &flatWriter{f: f}
		defer func() { l.w = orig }()
	}
	const k = 64
	evs := make([]*events.Event, b.N)
	for i := range evs {
		evs[i] = testEvent(i)
	}
	lat := make([][]time.Duration, k)
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := 0; w < k; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += k {
				t0 := time.Now()
				if _, err := l.Append(context.Background(), evs[i]); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	for _, x := range lat {
		all = append(all, x...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(l.Stats().FsyncP50Seconds*1e6, "fsync-p50-µs")
}

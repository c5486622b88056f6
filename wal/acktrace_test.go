package wal

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// AckTrace is called once per successful Append, with stages that are
// never negative and add up to the whole latency the caller saw.
func TestAckTraceDecomposes(t *testing.T) {
	var mu sync.Mutex
	var got []AckTiming
	l := openT(t, Options{Dir: filepath.Join(t.TempDir(), "wal"), AckTrace: func(a AckTiming) {
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	}})
	const appenders, per = 8, 25
	var calls atomic.Int64
	var outer sync.Map
	var wg sync.WaitGroup
	for w := 0; w < appenders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				evs := []*events.Event{testEvent(w*per + i)}
				if i%5 == 0 {
					evs = append(evs, testEvent(1000+w*per+i))
				}
				t0 := time.Now()
				if _, err := l.Append(context.Background(), evs...); err != nil {
					t.Error(err)
					return
				}
				outer.Store(calls.Add(1), time.Since(t0))
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != appenders*per {
		t.Fatalf("%d timings for %d appends", len(got), appenders*per)
	}
	var longest time.Duration
	outer.Range(func(_, v any) bool { longest = max(longest, v.(time.Duration)); return true })
	for i, a := range got {
		stages := []time.Duration{a.Encode, a.WaitGroup, a.Seal, a.Write, a.WaitSync, a.Fsync, a.Apply, a.WakeUp}
		var sum time.Duration
		for j, d := range stages {
			if d < 0 {
				t.Fatalf("timing %d: stage %d negative: %+v", i, j, a)
			}
			sum += d
		}
		if sum != a.Total || a.Total <= 0 || a.Total > longest {
			t.Fatalf("timing %d: stages sum to %v, total %v (longest Append seen by a caller %v)", i, sum, a.Total, longest)
		}
		if a.Fsync <= 0 || a.Group < 1 || a.Group > appenders*2 {
			t.Fatalf("timing %d: fsync %v group %d", i, a.Fsync, a.Group)
		}
	}
	// A failed append is not traced.
	if _, err := l.Append(context.Background(), &events.Event{}); err == nil {
		t.Fatal("invalid event appended")
	}
	if len(got) != appenders*per {
		t.Fatalf("%d timings after a failed append, want %d", len(got), appenders*per)
	}
}

package console

import (
	"testing"
	"time"
)

// TestRatesSummary: the rate and p99 are over the window the ring holds
// (the oldest kept sample to now), not since the log opened; the ring
// keeps a fixed number of samples.
func TestRatesSummary(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bounds := []float64{0.001, 0.01, 0.1}
	r := NewRates(10*time.Second, 3, nil)
	if s := r.Summary(Sample{At: t0}); s.WindowSeconds != 0 || s.AckP99Ms != -1 {
		t.Fatalf("no samples: %+v", s)
	}
	// Before the window: 1000 slow acks that must not count.
	r.Add(Sample{At: t0, Appends: 0, Bounds: bounds, Counts: []uint64{0, 0, 1000}, Count: 1000})
	r.Add(Sample{At: t0.Add(10 * time.Second), Appends: 100, Bounds: bounds, Counts: []uint64{0, 0, 1000}, Count: 1000})
	r.Add(Sample{At: t0.Add(20 * time.Second), Appends: 300, Bounds: bounds, Counts: []uint64{0, 0, 1000}, Count: 1000})
	r.Add(Sample{At: t0.Add(30 * time.Second), Appends: 600, Bounds: bounds, Counts: []uint64{100, 100, 1100}, Count: 1100})
	// Kept: 10 s, 20 s, 30 s; now at 40 s with 100 fast and 1 medium ack more.
	now := Sample{At: t0.Add(40 * time.Second), Appends: 1000, Bounds: bounds, Counts: []uint64{199, 200, 1200}, Count: 1200}
	s := r.Summary(now)
	if s.WindowSeconds != 30 || s.EventsPerSec != 30 || s.Acks != 200 {
		t.Fatalf("summary %+v", s)
	}
	// 200 acks in the window: 199 ≤ 1 ms, 1 ≤ 10 ms; the p99 (rank 198) is ≤ 1 ms.
	if s.AckP99Ms != 1 {
		t.Fatalf("p99 %v ms", s.AckP99Ms)
	}
	if len(s.Series) != 3 || s.Series[0] != 20 || s.Series[1] != 30 || s.Series[2] != 40 {
		t.Fatalf("series %v", s.Series)
	}
}

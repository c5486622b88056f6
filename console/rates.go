package console

import (
	"context"
	"math"
	"sync"
	"time"
)

// Rates keeps the recent throughput and acknowledgement latency for the
// overview: a fixed ring of samples of the daemon's counters (the ones
// /metrics serves), one every Every, so its size never changes.
type Rates struct {
	every  time.Duration
	sample func() Sample
	mu     sync.Mutex
	ring   []Sample
	n      int // samples taken
}

// Sample is a reading of the cumulative counters.
type Sample struct {
	At      time.Time
	Appends uint64 // events made durable since the log opened
	// Bounds are the upper bounds (seconds) of the acknowledgement
	// latency histogram; Counts its cumulative counts per bound, Count
	// its total.
	Bounds []float64
	Counts []uint64
	Count  uint64
}

// RateSummary is what the overview shows.
type RateSummary struct {
	WindowSeconds float64 `json:"windowSeconds"`
	EventsPerSec  float64 `json:"eventsPerSec"`
	// AckP99Ms is the p99 of API acknowledgement latency in the window
	// (the upper bound of its histogram bucket), -1 without requests.
	AckP99Ms float64 `json:"ackP99Ms"`
	Acks     uint64  `json:"acks"`
	// Series is events per second between consecutive samples, oldest
	// first (the sparkline).
	Series []float64 `json:"series"`
}

// NewRates returns a ring of keep samples taken every every by sample.
func NewRates(every time.Duration, keep int, sample func() Sample) *Rates {
	return &Rates{every: every, sample: sample, ring: make([]Sample, keep)}
}

// Run samples until ctx ends.
func (r *Rates) Run(ctx context.Context) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	r.Add(r.sample())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Add(r.sample())
		}
	}
}

// Add records a sample.
func (r *Rates) Add(s Sample) {
	r.mu.Lock()
	r.ring[r.n%len(r.ring)] = s
	r.n++
	r.mu.Unlock()
}

// Summary compares now (a fresh sample) with the oldest kept one.
func (r *Rates) Summary(now Sample) RateSummary {
	r.mu.Lock()
	var kept []Sample
	for i := max(0, r.n-len(r.ring)); i < r.n; i++ {
		kept = append(kept, r.ring[i%len(r.ring)])
	}
	r.mu.Unlock()
	kept = append(kept, now)
	out := RateSummary{AckP99Ms: -1, Series: []float64{}}
	if len(kept) < 2 {
		return out
	}
	old := kept[0]
	d := now.At.Sub(old.At).Seconds()
	if d < 1 {
		return out // too short a window to say a rate: still sampling
	}
	out.WindowSeconds = math.Round(d*10) / 10
	out.EventsPerSec = math.Round(float64(now.Appends-old.Appends)/d*10) / 10
	for i := 1; i < len(kept); i++ {
		if dt := kept[i].At.Sub(kept[i-1].At).Seconds(); dt > 0 {
			out.Series = append(out.Series, math.Round(float64(kept[i].Appends-kept[i-1].Appends)/dt*10)/10)
		}
	}
	out.Acks = now.Count - old.Count
	if out.Acks > 0 && len(now.Counts) == len(old.Counts) {
		rank := uint64(math.Ceil(0.99 * float64(out.Acks)))
		out.AckP99Ms = math.Inf(1)
		for i, c := range now.Counts {
			if c-old.Counts[i] >= rank {
				out.AckP99Ms = now.Bounds[i] * 1000
				break
			}
		}
		if math.IsInf(out.AckP99Ms, 1) {
			out.AckP99Ms = -2 // beyond the last bucket
		}
	}
	return out
}

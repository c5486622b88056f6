package wal

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Histogram counts observations into buckets. Counts[i] is the number of
// observations ≤ Bounds[i] and > Bounds[i-1] (not cumulative); the last
// element of Counts, one past Bounds, counts the rest (+Inf).
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

func (h *Histogram) observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.Sum += v
}

func (h Histogram) clone() Histogram {
	h.Counts = append([]uint64(nil), h.Counts...)
	return h
}

// Cumulative returns the Prometheus-style cumulative bucket counts.
func (h Histogram) Cumulative() []uint64 {
	out := make([]uint64, len(h.Counts))
	var n uint64
	for i, c := range h.Counts {
		n += c
		out[i] = n
	}
	return out
}

// Quantile estimates the q-quantile (0 < q ≤ 1) as the upper bound of the
// bucket it falls in; +Inf bucket reports the last bound. 0 when empty.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return 0
	}
	rank := uint64(q*float64(h.Count) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var n uint64
	for i, c := range h.Counts {
		n += c
		if n >= rank {
			if i < len(h.Bounds) {
				return h.Bounds[i]
			}
			break
		}
	}
	return h.Bounds[len(h.Bounds)-1]
}

// Stats are the committer's counters since Open.
type Stats struct {
	Appends uint64 `json:"appends"` // events made durable
	// Groups counts group commits: one fsync each, covering every group
	// the committer wrote (one WriteBatch each) while the previous fsync ran.
	Groups uint64 `json:"groups"`
	Bytes  uint64 `json:"bytes"` // entry bytes written
	// GroupSize is the events per group commit (per fsync).
	GroupSize Histogram `json:"group_size"`
	// FsyncSeconds is the time of each group's fsync (file, plus directory
	// when a segment was created).
	FsyncSeconds Histogram `json:"fsync_seconds"`
	// FsyncP50Seconds and FsyncP99Seconds are exact quantiles over the
	// last fsyncRing group fsyncs.
	FsyncP50Seconds float64 `json:"fsync_p50_seconds"`
	FsyncP99Seconds float64 `json:"fsync_p99_seconds"`
	FsyncErrors     uint64  `json:"fsync_errors"`
	LastFsyncError  string  `json:"last_fsync_error,omitempty"`
	LastSeq         uint64  `json:"last_seq"`
	Failed          string  `json:"failed,omitempty"` // the failed-state cause
}

var (
	groupBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}
	fsyncBounds = []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5}
)

// fsyncRing is how many recent fsync durations Stats keeps for exact
// quantiles: enough for every group commit of a `cmlab bench wal` run of
// 100,000 events at 64 appenders (about 2,800).
const fsyncRing = 4096

type statsRecorder struct {
	mu     sync.Mutex
	s      Stats
	recent [fsyncRing]time.Duration
	nrec   int // fsyncs recorded in total
}

func (r *statsRecorder) init() {
	r.s.GroupSize = newHistogram(groupBounds)
	r.s.FsyncSeconds = newHistogram(fsyncBounds)
}

func (r *statsRecorder) grouped(n, bytes int) {
	r.mu.Lock()
	r.s.Appends += uint64(n)
	r.s.Groups++
	r.s.Bytes += uint64(bytes)
	r.s.GroupSize.observe(float64(n))
	r.mu.Unlock()
}

func (r *statsRecorder) fsynced(d time.Duration) {
	r.mu.Lock()
	r.s.FsyncSeconds.observe(d.Seconds())
	r.recent[r.nrec%fsyncRing] = d
	r.nrec++
	r.mu.Unlock()
}

func (r *statsRecorder) fsyncFailed(err error) {
	r.mu.Lock()
	r.s.FsyncErrors++
	r.s.LastFsyncError = err.Error()
	r.mu.Unlock()
}

// Stats returns a snapshot of the committer's counters.
func (l *Log) Stats() Stats {
	l.stats.mu.Lock()
	s := l.stats.s
	s.GroupSize = s.GroupSize.clone()
	s.FsyncSeconds = s.FsyncSeconds.clone()
	recent := append([]time.Duration(nil), l.stats.recent[:min(l.stats.nrec, fsyncRing)]...)
	l.stats.mu.Unlock()
	if len(recent) > 0 {
		slices.Sort(recent)
		s.FsyncP50Seconds = recent[(len(recent)-1)/2].Seconds()
		s.FsyncP99Seconds = recent[min(len(recent)-1, int(math.Ceil(0.99*float64(len(recent))))-1)].Seconds()
	}
	s.LastSeq = l.LastSeq()
	if err := l.Err(); err != nil {
		s.Failed = err.Error()
	}
	return s
}

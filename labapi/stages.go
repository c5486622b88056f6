package labapi

import (
	"context"
	"math"
	"math/bits"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cmlab/cmlab/engine"
)

// Stage is one step of an acknowledged mutating POST, in the order a
// request goes through them (StageRecorder).
type Stage int

// The stages of a POST through decodeIdempotent; they add up to the
// handler's time from reading the body to the response written.
const (
	// StageRead: reading the request body.
	StageRead Stage = iota
	// StageDecode: the request id, the body hash, decoding and validating
	// the body, building the event and its response snapshot.
	StageDecode
	// StageRequestID: the per-id lock and the request-id index lookup.
	StageRequestID
	// StageAppend: the engine's append up to the acknowledgement, without
	// the projection: the queue to the committer, the group's write and
	// the wait for its fsync.
	StageAppend
	// StageProject: the projection of the commit group the event was in
	// (views, request-id index, observers), which the acknowledgement
	// waits for after the fsync.
	StageProject
	// StageAnswer: encoding and writing the response.
	StageAnswer
	numStages
)

var stageNames = [numStages]string{"read", "decode", "request id", "append+fsync", "projection", "answer"}

// String is the stage's name in the bench's table.
func (st Stage) String() string {
	if st < 0 || st >= numStages {
		return "stage?"
	}
	return stageNames[st]
}

// Stages lists every stage in order.
func Stages() []Stage {
	out := make([]Stage, numStages)
	for i := range out {
		out[i] = Stage(i)
	}
	return out
}

// StageRecorder aggregates the stage times of the acknowledged POSTs a
// Server handles while it is installed (Server.SetStageRecorder): a
// histogram and a sum per stage, and the same for the handler's total.
// Only requests answered 200 are counted. It is for benchmarks: a server
// without one measures nothing.
type StageRecorder struct {
	stages [numStages]durHist
	total  durHist
}

// StageStats summarise one stage over the recorded requests.
type StageStats struct {
	Stage  string  `json:"stage"`
	Count  uint64  `json:"count"`
	MeanUs float64 `json:"meanUs"`
	P50Us  float64 `json:"p50Us"`
	P99Us  float64 `json:"p99Us"`
}

// Stats are the recorded stages in order, then "handler total".
func (r *StageRecorder) Stats() []StageStats {
	out := make([]StageStats, 0, numStages+1)
	for i := range r.stages {
		out = append(out, r.stages[i].stats(Stage(i).String()))
	}
	return append(out, r.total.stats("handler total"))
}

// SetStageRecorder installs r (nil removes it). Safe while serving.
func (s *Server) SetStageRecorder(r *StageRecorder) { s.stageRec.Store(r) }

// postTrace times one request's stages; nil when no recorder is installed,
// and every method of a nil *postTrace does nothing.
type postTrace struct {
	rec         *StageRecorder
	start, last time.Time
	stages      [numStages]time.Duration
	append      engine.AppendTrace
}

type postTraceKey struct{}

// startTrace begins timing r's stages when a recorder is installed: the
// returned request carries the trace (and the engine's AppendTrace), which
// the mutation's steps mark. Without a recorder r is returned as it is.
func (s *Server) startTrace(r *http.Request) *http.Request {
	rec := s.stageRec.Load()
	if rec == nil {
		return r
	}
	now := time.Now()
	t := &postTrace{rec: rec, start: now, last: now}
	ctx := context.WithValue(r.Context(), postTraceKey{}, t)
	return r.WithContext(engine.WithAppendTrace(ctx, &t.append))
}

// traceOf is the trace ctx carries, nil if none. Without a recorder it
// does not look (a context lookup walks the request's whole chain).
func (s *Server) traceOf(ctx context.Context) *postTrace {
	if s.stageRec.Load() == nil {
		return nil
	}
	t, _ := ctx.Value(postTraceKey{}).(*postTrace)
	return t
}

// mark ends stage st now: it is charged the time since the last mark.
func (t *postTrace) mark(st Stage) {
	if t == nil {
		return
	}
	now := time.Now()
	t.stages[st] += now.Sub(t.last)
	t.last = now
}

// markAppend ends the append: its time less the projection the engine
// reported goes to StageAppend, the projection to StageProject.
func (t *postTrace) markAppend() {
	if t == nil {
		return
	}
	now := time.Now()
	d := now.Sub(t.last)
	p := min(t.append.Project, d)
	t.stages[StageAppend] += d - p
	t.stages[StageProject] += p
	t.last = now
}

// done records the request's stages (the answer ends now).
func (t *postTrace) done() {
	if t == nil {
		return
	}
	t.mark(StageAnswer)
	for i, d := range t.stages {
		t.rec.stages[i].observe(d)
	}
	t.rec.total.observe(t.last.Sub(t.start))
}

// durHist is a lock-free histogram of durations: buckets of a quarter
// power of two of nanoseconds (at most 19% wide), with the count and the
// sum.
type durHist struct {
	count, sum atomic.Uint64
	buckets    [64 * 4]atomic.Uint64
}

func durBucket(ns uint64) int {
	if ns < 4 {
		return int(ns)
	}
	e := bits.Len64(ns) - 1       // 2^e ≤ ns
	q := int(ns>>(uint(e)-2)) & 3 // the two bits below the leading one
	return e*4 + q
}

// durBucketMid is the middle of bucket b in nanoseconds.
func durBucketMid(b int) float64 {
	if b < 4 {
		return float64(b)
	}
	e, q := b/4, b%4
	return math.Ldexp(1+float64(q)/4+1.0/8, e)
}

func (h *durHist) observe(d time.Duration) {
	ns := uint64(max(d, 0))
	h.count.Add(1)
	h.sum.Add(ns)
	h.buckets[durBucket(ns)].Add(1)
}

func (h *durHist) quantile(q float64) float64 {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var c uint64
	for b := range h.buckets {
		if c += h.buckets[b].Load(); c >= rank {
			return durBucketMid(b)
		}
	}
	return durBucketMid(len(h.buckets) - 1)
}

func (h *durHist) stats(name string) StageStats {
	st := StageStats{Stage: name, Count: h.count.Load()}
	if st.Count > 0 {
		st.MeanUs = float64(h.sum.Load()) / float64(st.Count) / 1e3
		st.P50Us = h.quantile(0.5) / 1e3
		st.P99Us = h.quantile(0.99) / 1e3
	}
	return st
}

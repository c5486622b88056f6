package labapi

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cmlab/cmlab/home"
)

// BenchOptions configure BenchAPI.
type BenchOptions struct {
	Dir      string // scratch directory (a fresh home is made inside)
	Clients  int    // concurrent POST clients (default 32)
	Requests int    // total POSTs (default 20000)
	// PollLines are the feedback.jsonl sizes the end-of-file poll is timed at
	// (default 1,000 and 1,000,000).
	PollLines []int
	PollReps  int // polls timed per size (default 200)
}

// BenchResult is what BenchAPI measured.
type BenchResult struct {
	Clients    int           `json:"clients"`
	Requests   int           `json:"requests"`
	Errors     int64         `json:"errors"`
	Elapsed    time.Duration `json:"elapsedNs"`
	EventsPerS float64       `json:"eventsPerSecond"`
	P50, P99   time.Duration `json:"-"`
	P50Ms      float64       `json:"p50Ms"`
	P99Ms      float64       `json:"p99Ms"`
	MaxMs      float64       `json:"maxMs"`
	Polls      []PollBench   `json:"polls"`
	PollRatio  float64       `json:"pollRatioLargestToSmallest"`
	MeanGroup  float64       `json:"meanGroupSize"`
	FsyncP99Ms float64       `json:"fsyncP99Ms"`
}

// PollBench is the median time of a poll at the end of a store.
type PollBench struct {
	Lines    int     `json:"lines"`
	Bytes    int64   `json:"bytes"`
	MedianUs float64 `json:"medianUs"`
	P99Us    float64 `json:"p99Us"`
}

// BenchAPI runs `cmlab bench api`: a daemon on 127.0.0.1:0 over a fresh
// home takes POST /api/feedback from Clients concurrent clients (each
// with its own request id), then GET /api/feedback is timed at the end of
// feedback stores of PollLines lines (cursor = the last line's start).
func BenchAPI(ctx context.Context, o BenchOptions) (*BenchResult, error) {
	if o.Clients <= 0 {
		o.Clients = 32
	}
	if o.Requests <= 0 {
		o.Requests = 20000
	}
	if len(o.PollLines) == 0 {
		o.PollLines = []int{1000, 1000000}
	}
	if o.PollReps <= 0 {
		o.PollReps = 200
	}
	h := home.Home{Dir: filepath.Join(o.Dir, "home")}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan DaemonInfo, 1)
	done := make(chan error, 1)
	srvCh := make(chan *Server, 1)
	go func() {
		done <- RunDaemon(dctx, DaemonOptions{Home: h, Listen: "127.0.0.1:0", Ready: func(i DaemonInfo) { ready <- i },
			onServer: func(s *Server) { srvCh <- s }})
	}()
	var info DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		return nil, err
	}
	tok, err := h.OperatorToken()
	if err != nil {
		return nil, err
	}
	res := &BenchResult{Clients: o.Clients, Requests: o.Requests}
	lat, errs, elapsed, err := PostFeedback(ctx, FeedbackLoad{URL: "http://" + info.Listen, Token: tok,
		IDPrefix: "bench", Requests: o.Requests, Clients: o.Clients})
	if err != nil {
		return nil, err
	}
	res.Elapsed, res.Errors = elapsed, errs
	res.EventsPerS = float64(o.Requests-int(res.Errors)) / res.Elapsed.Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.P50, res.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	res.P50Ms, res.P99Ms = ms(res.P50), ms(res.P99)
	res.MaxMs = ms(lat[len(lat)-1])
	// The log's own view of the run: group sizes and fsync latency.
	st := (<-srvCh).opts.Engine.Log().Stats()
	if st.Groups > 0 {
		res.MeanGroup = float64(st.Appends) / float64(st.Groups)
	}
	res.FsyncP99Ms = st.FsyncSeconds.Quantile(0.99) * 1000
	cancel()
	if err := <-done; err != nil {
		return nil, err
	}

	for _, n := range o.PollLines {
		pb, err := benchPoll(filepath.Join(o.Dir, fmt.Sprintf("poll-%d.jsonl", n)), n, o.PollReps)
		if err != nil {
			return nil, err
		}
		res.Polls = append(res.Polls, pb)
	}
	if len(res.Polls) > 1 && res.Polls[0].MedianUs > 0 {
		res.PollRatio = res.Polls[len(res.Polls)-1].MedianUs / res.Polls[0].MedianUs
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchPoll writes a store of n lines and times polls from the start of
// its last line, through the same function the route calls.
func benchPoll(path string, n, reps int) (PollBench, error) {
	f, err := os.Create(path)
	if err != nil {
		return PollBench{}, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var lastStart int64
	var size int64
	for i := 0; i < n; i++ {
		line := fmt.Sprintf(`{"schemaVersion":1,"id":"fb_%08d","createdAt":"2026-02-06T00:00:00.000Z","sessionId":"lab_bench","ratings":{"overall":%d},"notes":"line %d"}`+"\n", i, i%101, i)
		lastStart = size
		size += int64(len(line))
		w.WriteString(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return PollBench{}, err
	}
	f.Close()
	defer os.Remove(path)
	since := fmt.Sprint(lastStart)
	times := make([]time.Duration, reps)
	for i := range times {
		t0 := time.Now()
		page, err := PollFeedback(path, since, "lab_bench", 0)
		times[i] = time.Since(t0)
		if err != nil {
			return PollBench{}, err
		}
		if len(page.Items) != 1 {
			return PollBench{}, fmt.Errorf("poll at end of %d lines returned %d items", n, len(page.Items))
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return PollBench{Lines: n, Bytes: size, MedianUs: float64(times[len(times)/2].Nanoseconds()) / 1000,
		P99Us: float64(times[len(times)*99/100].Nanoseconds()) / 1000}, nil
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/wal"
	"github.com/google/uuid"
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
	// ProfileDir, when set, receives the CPU, block and mutex profiles of
	// the timed POSTs (api.cpu, api.block, api.mutex; go tool pprof).
	ProfileDir string
	// Client sends the timed POSTs: ClientNetHTTP ("" too) or ClientRaw.
	Client string
}

// BenchResult is what BenchAPI measured.
type BenchResult struct {
	Clients    int           `json:"clients"`
	Client     string        `json:"client"`
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
	// CPUUsPerEvent is the process's CPU time (user + system, the daemon
	// and the bench's own clients together) per acknowledged POST of the
	// timed run: on a shared machine a steadier figure than events/s, and
	// on an otherwise idle one with C cores the rate cannot exceed
	// C×10⁶/CPUUsPerEvent.
	CPUUsPerEvent float64 `json:"cpuUsPerEvent"`
	// AllocsPerEvent and AllocBytesPerEvent are the heap allocations of the
	// process (daemon and clients) per acknowledged POST of the timed run
	// (runtime.MemStats Mallocs and TotalAlloc): they do not depend on the
	// machine's load, so a change to the POST path shows in them when the
	// CPU figure is lost in another program's noise.
	AllocsPerEvent     float64 `json:"allocsPerEvent"`
	AllocBytesPerEvent float64 `json:"allocBytesPerEvent"`
	FsyncP99Ms         float64 `json:"fsyncP99Ms"`
	// FsyncPct is the share of the timed run's wall time the log spent in
	// fsync (its fsyncs run one at a time): near 100 the POSTs wait for
	// the disk, as when other programs load it, and no overlap of the
	// other stages can raise the rate.
	FsyncPct float64 `json:"fsyncPct"`
	// Stages is the breakdown of one acknowledged POST by stage, from a
	// second pass of Requests POSTs with a labapi.StageRecorder installed
	// (StagePass); StageOutsideUs is the mean client latency of that pass
	// less the mean handler total: the HTTP round trip outside the
	// handler (connection, header parsing, routing and auth, the client).
	Stages         []labapi.StageStats `json:"stages,omitempty"`
	StagePass      *PeerResult         `json:"stagePass,omitempty"`
	StageOutsideUs float64             `json:"stageOutsideUs,omitempty"`
}

// PollBench is the median time of a poll at the end of a store, over HTTP.
type PollBench struct {
	// Size is the poll size asked for (--poll-lines); Lines is the
	// store's line count when polled: more when a peer's store already
	// held more, or the timed POSTs had grown it past Size.
	Size     int     `json:"size"`
	Lines    int     `json:"lines"`
	Bytes    int64   `json:"bytes"`
	MedianUs float64 `json:"medianUs"`
	P99Us    float64 `json:"p99Us"`
}

// BenchAPI runs `cmlab bench api`: a daemon on 127.0.0.1:0 over a fresh
// home gets the load of the peer mode (runFeedbackBench), through the same
// HTTP client: GET /api/feedback timed at the end of stores of PollLines
// lines (cursor = the last line's start; sizes up to Requests before the
// timed POSTs, larger ones after), and Requests POST /api/feedback from
// Clients concurrent clients (each with its own request id).
func BenchAPI(ctx context.Context, o BenchOptions) (*BenchResult, error) {
	if err := checkClient(o.Client); err != nil {
		return nil, err
	}
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
	d, err := daemon.Start(ctx, daemon.Options{Home: h, Listen: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	info, dh := d.Info, d.Home
	res := &BenchResult{Clients: o.Clients, Requests: o.Requests}
	// The same load, client and placement as the peer mode (BenchPeer):
	// only the way the large stores are built differs (see engineGrow).
	log := dh.Engine.Log()
	var before wal.Stats
	var cpuBefore time.Duration
	var memBefore runtime.MemStats
	var fsyncSum float64 // seconds the log spent in fsync during the timed POSTs
	prof := &postProfile{dir: o.ProfileDir}
	var profErr error
	pr, err := runFeedbackBench(ctx, PeerOptions{URL: "http://" + info.Listen, Clients: o.Clients, Requests: o.Requests,
		PollLines: o.PollLines, PollReps: o.PollReps, Client: o.Client}, benchHooks{grow: engineGrow(dh),
		beforePosts: func() {
			if o.ProfileDir != "" {
				profErr = prof.start()
			}
			before = log.Stats()
			runtime.ReadMemStats(&memBefore)
			cpuBefore = ProcessCPU()
		},
		afterPosts: func() {
			cpu := ProcessCPU() - cpuBefore
			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			if n := o.Requests; n > 0 {
				res.CPUUsPerEvent = float64(cpu.Microseconds()) / float64(n)
				res.AllocsPerEvent = float64(mem.Mallocs-memBefore.Mallocs) / float64(n)
				res.AllocBytesPerEvent = float64(mem.TotalAlloc-memBefore.TotalAlloc) / float64(n)
			}
			if err := prof.stop(); profErr == nil {
				profErr = err
			}
			// The log's own view of the timed POSTs: group sizes and fsync latency.
			after := log.Stats()
			if g := after.Groups - before.Groups; g > 0 {
				res.MeanGroup = float64(after.Appends-before.Appends) / float64(g)
			}
			fsyncs := histDiff(after.FsyncSeconds, before.FsyncSeconds)
			res.FsyncP99Ms = fsyncs.Quantile(0.99) * 1000
			fsyncSum = fsyncs.Sum
		}})
	if err != nil {
		return nil, err
	}
	if profErr != nil {
		return nil, fmt.Errorf("profiles: %w", profErr)
	}
	res.Client = pr.Client
	res.Errors, res.Elapsed, res.EventsPerS = pr.Errors, time.Duration(pr.ElapsedNs), pr.EventsPerS
	if res.Elapsed > 0 {
		res.FsyncPct = 100 * fsyncSum / res.Elapsed.Seconds()
	}
	res.P50Ms, res.P99Ms, res.MaxMs = pr.P50Ms, pr.P99Ms, pr.MaxMs
	res.P50, res.P99 = time.Duration(pr.P50Ms*1e6), time.Duration(pr.P99Ms*1e6)
	res.Polls = pr.Polls
	if err := stagePass(ctx, dh, "http://"+info.Listen, o, res); err != nil {
		return nil, err
	}
	if len(res.Polls) > 1 && res.Polls[0].MedianUs > 0 {
		res.PollRatio = res.Polls[len(res.Polls)-1].MedianUs / res.Polls[0].MedianUs
	}
	if err := d.Stop(); err != nil {
		return nil, err
	}
	return res, nil
}

// stagePass sends o.Requests more POSTs the way the timed ones were sent,
// with a StageRecorder installed on the daemon's server, and fills
// res.Stages. It is a pass of its own so that the timing of the stages
// (a context value and a clock reading per stage) stays out of the
// headline figures.
func stagePass(ctx context.Context, dh *daemon.Home, url string, o BenchOptions, res *BenchResult) error {
	p, err := newPeerClient(ctx, url, o.Clients)
	if err != nil {
		return err
	}
	defer p.hc.CloseIdleConnections()
	rec := &labapi.StageRecorder{}
	dh.Server.SetStageRecorder(rec)
	lat, errs, el := p.postWith(ctx, o.Client, fmt.Sprintf("stages-%d", time.Now().UnixNano()), o.Requests, o.Clients)
	dh.Server.SetStageRecorder(nil)
	if err := ctx.Err(); err != nil {
		return err
	}
	pr := &PeerResult{URL: p.base, Clients: o.Clients, Requests: o.Requests, Errors: errs, ElapsedNs: int64(el), Client: o.Client}
	fillLatency(pr, lat, el)
	res.StagePass, res.Stages = pr, rec.Stats()
	if total := res.Stages[len(res.Stages)-1]; total.Count > 0 {
		res.StageOutsideUs = pr.MeanMs*1000 - total.MeanUs
	}
	return nil
}

// histDiff is the histogram of the observations between two snapshots.
func histDiff(after, before wal.Histogram) wal.Histogram {
	d := after
	d.Counts = make([]uint64, len(after.Counts))
	for i := range d.Counts {
		d.Counts[i] = after.Counts[i]
		if i < len(before.Counts) {
			d.Counts[i] -= before.Counts[i]
		}
	}
	d.Count, d.Sum = after.Count-before.Count, after.Sum-before.Sum
	return d
}

// engineGrow builds cmlab's store from have to n lines in-process: the
// events a POST /api/feedback of the bench's body appends (without its
// request id), 1,000 per Append, through the daemon's engine — so
// feedback.jsonl grows exactly as through the API, in seconds instead of
// the minutes a million POSTs take. Only the building differs from the
// peer's side; the polls go over HTTP alike.
func engineGrow(dh *daemon.Home) growFunc {
	return func(ctx context.Context, _ *peerClient, _ string, have, n int) error {
		var b struct {
			Notes   string          `json:"notes"`
			Ratings *events.Ratings `json:"ratings"`
		}
		if err := json.Unmarshal([]byte(peerFeedbackBody), &b); err != nil {
			return err
		}
		ratings := b.Ratings
		sid := dh.Server.SessionID()
		for i := have; i < n; {
			k := min(1000, n-i)
			evs := make([]*events.Event, 0, k)
			for range k {
				e := events.FeedbackEntry{SchemaVersion: 1, ID: "fb_" + uuid.Must(uuid.NewV7()).String(), SessionID: sid, Ratings: ratings, Notes: b.Notes}
				ev, err := events.New(sid, &events.FeedbackSubmitted{Entry: e})
				if err != nil {
					return err
				}
				evs = append(evs, ev)
			}
			if _, err := dh.Engine.Append(ctx, evs...); err != nil {
				return err
			}
			i += k
		}
		return nil
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

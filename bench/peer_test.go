package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeLab is a tiny Lab server: it checks the headers a browser client
// sends, keeps feedback lines in memory and pages them by byte cursor.
type fakeLab struct {
	mu      sync.Mutex
	lines   []string
	ids     map[string]bool
	posts   int
	bad     []string
	configs int
	// polls: the store's line count at each GET /api/feedback without a
	// limit (a timed poll; the store scans page with a limit).
	polls []int
	// timedAt: the store's line count at each POST whose request id is
	// not a fill's (a timed POST).
	timedAt []int
}

func (f *fakeLab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/api/config" {
		f.configs++
		io.WriteString(w, `{"sessionId":"lab_x","token":"tok-1"}`)
		return
	}
	if r.Header.Get("X-CM-LAB-TOKEN") != "tok-1" {
		f.bad = append(f.bad, "token "+r.URL.String())
		w.WriteHeader(401)
		return
	}
	if o := r.Header.Get("Origin"); o != "http://"+r.Host {
		f.bad = append(f.bad, "origin "+o+" host "+r.Host)
	}
	switch {
	case r.Method == "POST" && r.URL.Path == "/api/feedback":
		id := r.Header.Get("X-CM-LAB-REQUEST-ID")
		if id == "" || f.ids[id] {
			f.bad = append(f.bad, "request id "+id)
		}
		f.ids[id] = true
		f.posts++
		if !strings.Contains(id, "-fill") {
			f.timedAt = append(f.timedAt, len(f.lines))
		}
		f.lines = append(f.lines, fmt.Sprintf(`{"id":"fb_%d"}`+"\n", len(f.lines)))
		io.WriteString(w, `{"feedbackId":"x"}`)
	case r.Method == "GET" && r.URL.Path == "/api/feedback":
		if !r.URL.Query().Has("limit") {
			f.polls = append(f.polls, len(f.lines))
		}
		since, _ := strconv.Atoi(r.URL.Query().Get("since"))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 || limit > 500 {
			limit = 500
		}
		off, i := 0, 0
		for i < len(f.lines) && off < since {
			off += len(f.lines[i])
			i++
		}
		var items []string
		for ; i < len(f.lines) && len(items) < limit; i++ {
			items = append(items, strings.TrimSpace(f.lines[i]))
			off += len(f.lines[i])
		}
		fmt.Fprintf(w, `{"items":[%s],"nextCursor":"%d"}`, strings.Join(items, ","), max(off, since))
	default:
		w.WriteHeader(404)
	}
}

func TestBenchPeerFakeLab(t *testing.T) {
	f := &fakeLab{ids: map[string]bool{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	res, err := BenchPeer(context.Background(), PeerOptions{URL: srv.URL, Clients: 4, Requests: 40,
		PollLines: []int{1200, 60, 5000}, MaxBuildLines: 2000, PollReps: 3})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Fatalf("bad requests: %v", f.bad[:min(5, len(f.bad))])
	}
	if f.configs != 1 {
		t.Errorf("GET /api/config %d times, want 1", f.configs)
	}
	// 40 timed POSTs, then the store grows through the API, smallest size first:
	// 60 is built first (from 40), 1200 next; 5000 is skipped.
	if f.posts != 1200 || res.Errors != 0 || res.Requests != 40 {
		t.Errorf("posts %d errors %d requests %d, want 1200 0 40", f.posts, res.Errors, res.Requests)
	}
	if len(res.Polls) != 2 || res.Polls[0].Lines != 60 || res.Polls[1].Lines != 1200 {
		t.Errorf("polls %+v, want at 60 and 1200 lines", res.Polls)
	}
	if len(res.Skipped) != 1 || res.Skipped[0] != 5000 {
		t.Errorf("skipped %v, want [5000]", res.Skipped)
	}
	var size int64
	for _, l := range f.lines {
		size += int64(len(l))
	}
	if res.Polls[1].Bytes != size {
		t.Errorf("poll bytes %d, want %d", res.Polls[1].Bytes, size)
	}
	if res.EventsPerS <= 0 || res.P99Ms < res.P50Ms {
		t.Errorf("events/s %v p50 %v p99 %v", res.EventsPerS, res.P50Ms, res.P99Ms)
	}
}

func TestBenchPeerRejectsUnauthorized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/config" {
			io.WriteString(w, `{"sessionId":"lab_x"}`)
			return
		}
		w.WriteHeader(401)
	}))
	defer srv.Close()
	_, err := BenchPeer(context.Background(), PeerOptions{URL: srv.URL, Clients: 2, Requests: 4, PollReps: 1})
	if err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("err %v, want ErrPeer no token", err)
	}
}

// Poll sizes up to the request count are built and polled before the
// timed POSTs, larger ones after: the sequence cmlab's own side runs too
// (BenchAPI), so that both sides poll stores of the same size.
func TestBenchPeerPlacement(t *testing.T) {
	f := &fakeLab{ids: map[string]bool{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	res, err := BenchPeer(context.Background(), PeerOptions{URL: srv.URL, Clients: 3, Requests: 40,
		PollLines: []int{100, 10}, PollReps: 3})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []int{10, 10, 10, 100, 100, 100}; !slices.Equal(f.polls, want) {
		t.Errorf("polls at store sizes %v, want %v", f.polls, want)
	}
	if len(f.timedAt) != 40 || slices.Min(f.timedAt) != 10 || slices.Max(f.timedAt) != 49 {
		t.Errorf("%d timed POSTs at store sizes %v, want 40 from 10 to 49 lines", len(f.timedAt), f.timedAt)
	}
	if f.posts != 100 || len(res.Polls) != 2 || res.Polls[0].Size != 10 || res.Polls[0].Lines != 10 ||
		res.Polls[1].Size != 100 || res.Polls[1].Lines != 100 {
		t.Errorf("%d POSTs, polls %+v", f.posts, res.Polls)
	}
}

// cmlab's side runs the same sequence against its own daemon over HTTP:
// the small store is polled at exactly its size, before the timed POSTs
// grow it, and the large one after them, grown in-process.
func TestBenchAPIPlacement(t *testing.T) {
	res, err := BenchAPI(context.Background(), BenchOptions{Dir: t.TempDir(), Clients: 4, Requests: 50,
		PollLines: []int{20, 1500}, PollReps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.EventsPerS <= 0 || res.MeanGroup < 1 || res.P99Ms < res.P50Ms {
		t.Fatalf("result %+v", res)
	}
	// Every POST allocates (its request, body and event at least).
	if res.AllocsPerEvent < 3 || res.AllocBytesPerEvent < 100 {
		t.Fatalf("allocations per event %.1f, %.0f bytes", res.AllocsPerEvent, res.AllocBytesPerEvent)
	}
	if len(res.Polls) != 2 || res.Polls[0].Size != 20 || res.Polls[0].Lines != 20 ||
		res.Polls[1].Size != 1500 || res.Polls[1].Lines != 1500 || res.Polls[1].Bytes <= res.Polls[0].Bytes {
		t.Fatalf("polls %+v", res.Polls)
	}
}

// The share of the timed POSTs the log spent in fsync: every POST waits
// for one, so it is above zero, and the log's fsyncs run one at a time, so
// it stays about within the run's wall time.
func TestBenchAPIFsyncShare(t *testing.T) {
	res, err := BenchAPI(context.Background(), BenchOptions{Dir: t.TempDir(), Clients: 4, Requests: 50,
		PollLines: []int{20}, PollReps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.FsyncPct <= 0 || res.FsyncPct > 150 {
		t.Fatalf("fsync %.1f%% of the run", res.FsyncPct)
	}
}

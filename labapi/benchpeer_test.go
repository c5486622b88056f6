package labapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
		f.lines = append(f.lines, fmt.Sprintf(`{"id":"fb_%d"}`+"\n", len(f.lines)))
		io.WriteString(w, `{"feedbackId":"x"}`)
	case r.Method == "GET" && r.URL.Path == "/api/feedback":
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

package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRawClientSendsTheSameRequests: --client raw sends the requests the
// net/http client sends (token, Origin for the Host, a fresh request id
// each, the body) and reads every answer whatever its framing: a
// Content-Length, chunked (the server flushed before the end), and a
// connection the server closes after answering.
func TestRawClientSendsTheSameRequests(t *testing.T) {
	f := &fakeLab{ids: map[string]bool{}}
	var n, bodies atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			if b, _ := io.ReadAll(r.Body); string(b) == peerFeedbackBody {
				bodies.Add(1)
			}
			r.Body = io.NopCloser(strings.NewReader(""))
			switch n.Add(1) % 3 {
			case 1: // chunked
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				io.WriteString(w, `{"feedbackId":`)
				w.(http.Flusher).Flush()
				io.WriteString(w, `"x"}`)
				return
			case 2:
				w.Header().Set("Connection", "close")
			}
		}
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	res, err := BenchPeer(context.Background(), PeerOptions{URL: srv.URL, Clients: 4, Requests: 300, PollLines: []int{10}, PollReps: 2, Client: ClientRaw})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Fatalf("bad requests: %v", f.bad[:min(5, len(f.bad))])
	}
	// 10 built through the API (net/http), then 300 timed (raw): a third
	// of them answered chunked by the wrapper, not seen by the fake.
	if res.Errors != 0 || res.Client != ClientRaw || n.Load() != 310 || bodies.Load() != 310 {
		t.Fatalf("errors %d client %q posts %d bodies %d, want 0 raw 310 310", res.Errors, res.Client, n.Load(), bodies.Load())
	}
	if _, err := BenchPeer(context.Background(), PeerOptions{URL: srv.URL, Client: "curl"}); err == nil || !strings.Contains(err.Error(), "unknown client") {
		t.Fatalf("client curl: %v", err)
	}
}

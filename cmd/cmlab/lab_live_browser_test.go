package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// streamProxy stands between the page and its daemon (a reverse proxy on
// 127.0.0.1) and can cut the page's event streams as a network would: the
// connection dies mid-stream. It records what each stream carried.
type streamProxy struct {
	srv     *httptest.Server
	mu      sync.Mutex
	streams []*proxiedStream
}

type proxiedStream struct {
	lastEventID string   // the request's Last-Event-ID header
	ids         []string // the id: lines forwarded to the page
	data        []string // the data: lines forwarded
	cancel      context.CancelFunc
}

func newStreamProxy(t *testing.T, daemon string) *streamProxy {
	t.Helper()
	target, err := url.Parse(daemon)
	if err != nil {
		t.Fatal(err)
	}
	p := &streamProxy{}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target) // the daemon's Host: its DNS-rebinding guard holds
		if r.In.Header.Get("Origin") != "" {
			r.Out.Header.Set("Origin", daemon)
		}
	}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/events" {
			rp.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		s := &proxiedStream{lastEventID: r.Header.Get("Last-Event-ID"), cancel: cancel}
		p.mu.Lock()
		p.streams = append(p.streams, s)
		p.mu.Unlock()
		rp.ServeHTTP(&streamRecorder{ResponseWriter: w, p: p, s: s}, r.WithContext(ctx))
	}))
	t.Cleanup(func() {
		// The browser may still hold a stream: end them first.
		p.cut()
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

// cut kills every open stream mid-way (the proxy aborts the page's
// connection).
func (p *streamProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.streams {
		s.cancel()
	}
}

func (p *streamProxy) snapshot() []proxiedStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]proxiedStream, len(p.streams))
	for i, s := range p.streams {
		out[i] = proxiedStream{lastEventID: s.lastEventID, ids: append([]string(nil), s.ids...), data: append([]string(nil), s.data...)}
	}
	return out
}

// streamRecorder forwards a stream and notes its id: and data: lines.
type streamRecorder struct {
	http.ResponseWriter
	p    *streamProxy
	s    *proxiedStream
	part []byte
}

func (w *streamRecorder) Write(b []byte) (int, error) {
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		line := string(w.part[:i])
		w.part = w.part[i+1:]
		w.p.mu.Lock()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			w.s.ids = append(w.s.ids, v)
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			w.s.data = append(w.s.data, v)
		}
		w.p.mu.Unlock()
	}
	return w.ResponseWriter.Write(b)
}

func (w *streamRecorder) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *streamRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// labPageLiveResume: the page's event stream dies mid-way (the daemon
// stays up); ratings another client sends meanwhile appear once the
// browser has reconnected by itself with Last-Event-ID: the resumed
// stream starts right after the last event the page had, so no event is
// missed and none comes twice, and the page was never reloaded.
func labPageLiveResume(t *testing.T, b *browser, mp4 []byte) {
	dir := t.TempDir()
	root := filepath.Join(dir, "renders")
	srv := startServe(t, "--home", filepath.Join(dir, "home"), "--allow-root", root)
	var r struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "a", "Resumed", mp4)}, &r)
	px := newStreamProxy(t, srv.base)
	b.run(t, "open the review through the proxy",
		chromedp.Navigate(px.srv.URL+"/#/review/"+r.RunID),
		waitJS(`document.getElementById('r-overall') && document.getElementById('live').dataset.state === 'live'`, 15*time.Second),
		chromedp.Evaluate(`window.__sameDocument = 1`, nil))
	send := func(notes string) string {
		var out struct {
			FeedbackID string `json:"feedbackId"`
		}
		srv.postJSON(t, "/api/feedback", map[string]any{"runId": r.RunID, "notes": notes}, &out)
		return out.FeedbackID
	}
	ids := []string{send("before the cut")}
	b.run(t, "a rating through the first stream",
		waitJS(`document.getElementById('earlierList') && document.getElementById('earlierList').textContent.includes('before the cut')`, 15*time.Second))
	px.cut()
	ids = append(ids, send("during the gap 1"), send("during the gap 2"))
	b.run(t, "the stream resumes by itself",
		waitJS(`document.getElementById('earlierList').textContent.includes('during the gap 1') && document.getElementById('earlierList').textContent.includes('during the gap 2') && window.__sameDocument === 1`, 30*time.Second),
		waitJS(`document.getElementById('live').dataset.state === 'live'`, 15*time.Second))
	ids = append(ids, send("after the resume"))
	b.run(t, "a rating through the resumed stream",
		waitJS(`document.getElementById('earlierList').textContent.includes('after the resume')`, 15*time.Second))
	// The cut stream's dying request is what the browser reports.
	b.drain(t, "stream cut", "ERR_INCOMPLETE_CHUNKED_ENCODING", "EventSource")

	streams := px.snapshot()
	if len(streams) != 2 {
		t.Fatalf("%d event streams through the proxy, want the first and its resumption: %+v", len(streams), streams)
	}
	first, second := streams[0], streams[1]
	if len(first.ids) == 0 || second.lastEventID != first.ids[len(first.ids)-1] {
		t.Fatalf("the resumed stream asked with Last-Event-ID %q; the first stream's last id was %v", second.lastEventID, first.ids)
	}
	// Every rating came exactly once over the two streams, in order.
	var got []string
	seen := map[string]bool{}
	for _, s := range streams {
		for i, d := range s.data {
			var ev struct {
				Type string `json:"type"`
				Data struct {
					Entry struct {
						ID string `json:"id"`
					} `json:"entry"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(d), &ev); err != nil {
				t.Fatalf("stream data %q: %v", d, err)
			}
			if seen[s.ids[i]] {
				t.Errorf("event %s came twice", s.ids[i])
			}
			seen[s.ids[i]] = true
			if ev.Type == "feedback.submitted" {
				got = append(got, ev.Data.Entry.ID)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("feedback over the streams: %v, want %v", got, ids)
	}
	b.check(t, "live resume")
}

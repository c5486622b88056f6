package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrPeer marks a peer Lab server that does not answer as the Lab wire
// contract says.
var ErrPeer = errors.New("peer Lab server")

// PeerOptions configure BenchPeer.
type PeerOptions struct {
	URL       string // base URL of any Lab server, e.g. http://127.0.0.1:3000
	Clients   int
	Requests  int
	PollLines []int // store sizes to poll at the end of; built through POST /api/feedback
	// MaxBuildLines skips poll sizes larger than this (building them through
	// the API is too slow on some peers); skipped sizes are reported.
	MaxBuildLines int
	PollReps      int
	// Client sends the timed POSTs: ClientNetHTTP ("" too) or ClientRaw.
	Client string
}

// PeerResult is what BenchPeer measured against one server.
type PeerResult struct {
	URL        string      `json:"url"`
	Clients    int         `json:"clients"`
	Requests   int         `json:"requests"`
	Errors     int64       `json:"errors"`
	ElapsedNs  int64       `json:"elapsedNs"`
	EventsPerS float64     `json:"eventsPerSecond"`
	MeanMs     float64     `json:"meanMs"`
	P50Ms      float64     `json:"p50Ms"`
	P99Ms      float64     `json:"p99Ms"`
	MaxMs      float64     `json:"maxMs"`
	Polls      []PollBench `json:"polls"`
	Skipped    []int       `json:"skippedPollLines,omitempty"`
	Client     string      `json:"client"`
}

// peerClient speaks only the Lab wire contract to a server: the token
// from GET /api/config, X-CM-LAB-TOKEN, a request id per POST, and the
// Origin and Host a browser on the Lab page would send.
type peerClient struct {
	base    string
	host    string
	token   string
	session string
	hc      *http.Client
}

// newWireClient is a peerClient for base that has no token yet.
func newWireClient(base string, conns int) (*peerClient, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%w: bad URL %q", ErrPeer, base)
	}
	return &peerClient{base: u.String(), host: u.Host,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}, Timeout: time.Minute}}, nil
}

// newPeerClient is a peerClient for base holding the token its GET
// /api/config hands out.
func newPeerClient(ctx context.Context, base string, conns int) (*peerClient, error) {
	p, err := newWireClient(base, conns)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		SessionID string `json:"sessionId"`
		Token     string `json:"token"`
	}
	st, body, err := p.do(ctx, "GET", "/api/config", "", "")
	if err != nil {
		return nil, err
	}
	if st != 200 || json.Unmarshal(body, &cfg) != nil || cfg.Token == "" {
		return nil, fmt.Errorf("%w: GET /api/config: status %d, no token in %.200q", ErrPeer, st, body)
	}
	p.token, p.session = cfg.Token, cfg.SessionID
	return p, nil
}

func (p *peerClient) do(ctx context.Context, method, path, body, reqID string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Host = p.host
	req.Header.Set("Origin", p.base)
	req.Header.Set("Referer", p.base+"/")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.token != "" {
		req.Header.Set("X-CM-LAB-TOKEN", p.token)
	}
	if reqID != "" {
		req.Header.Set("X-CM-LAB-REQUEST-ID", reqID)
	}
	r, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return r.StatusCode, b, err
}

const peerFeedbackBody = `{"notes":"bench","ratings":{"overall":80,"hook":70}}`

// FeedbackLoad is a POST /api/feedback load on a Lab server (PostFeedback).
type FeedbackLoad struct {
	URL      string // the server, e.g. http://127.0.0.1:7788
	Token    string // sent as X-CM-LAB-TOKEN
	IDPrefix string // request ids are IDPrefix-0, IDPrefix-1, …
	Requests int
	Clients  int
	// OnAck, when set, is called after each 200 (from the client goroutines).
	OnAck func()
}

// PostFeedback sends the load the way the bench and the peer mode do, and
// returns the latencies (request order), the count of failed requests and
// the elapsed time.
func PostFeedback(ctx context.Context, l FeedbackLoad) ([]time.Duration, int64, time.Duration, error) {
	p, err := newWireClient(l.URL, l.Clients)
	if err != nil {
		return nil, 0, 0, err
	}
	defer p.hc.CloseIdleConnections()
	p.token = l.Token
	lat, errs, el := p.post(ctx, l.IDPrefix, l.Requests, l.Clients, l.OnAck)
	return lat, errs, el, nil
}

// post sends n POST /api/feedback from clients goroutines, each with its
// own request id, and returns the latencies (index order) and error count;
// onAck (if set) is called after each 200.
func (p *peerClient) post(ctx context.Context, prefix string, n, clients int, onAck func()) ([]time.Duration, int64, time.Duration) {
	return sendLoad(ctx, n, clients, onAck, func() (feedbackSender, func()) {
		return func(i int) (int, error) {
			st, _, err := p.do(ctx, "POST", "/api/feedback", peerFeedbackBody, fmt.Sprintf("%s-%d", prefix, i))
			return st, err
		}, nil
	})
}

// feedbackSender sends the request of index i and returns its status.
type feedbackSender func(i int) (int, error)

// sendLoad runs requests 0…n-1 from clients goroutines, each sending
// through the sender newSender makes for it (and calling its done, if
// any, when it stops), and returns the latencies (index order), the count
// of requests that failed or did not answer 200, and the elapsed time;
// onAck (if set) is called after each 200.
func sendLoad(ctx context.Context, n, clients int, onAck func(), newSender func() (feedbackSender, func())) ([]time.Duration, int64, time.Duration) {
	lat := make([]time.Duration, n)
	var next, errs atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send, done := newSender()
			if done != nil {
				defer done()
			}
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				st, err := send(i)
				lat[i] = time.Since(t0)
				if err != nil || st != 200 {
					errs.Add(1)
				} else if onAck != nil {
					onAck()
				}
			}
		}()
	}
	wg.Wait()
	return lat, errs.Load(), time.Since(start)
}

// postWith is post through the named client (ClientRaw: rawPost).
func (p *peerClient) postWith(ctx context.Context, client, prefix string, n, clients int) ([]time.Duration, int64, time.Duration) {
	if client == ClientRaw {
		return p.rawPost(ctx, prefix, n, clients, nil)
	}
	return p.post(ctx, prefix, n, clients, nil)
}

// BenchPeer drives the Lab server at o.URL with the load of `cmlab bench
// api` (runFeedbackBench): the same sequence, client and placement as
// cmlab's own side, growing the store through POST /api/feedback.
func BenchPeer(ctx context.Context, o PeerOptions) (*PeerResult, error) {
	return runFeedbackBench(ctx, o, benchHooks{})
}

// benchHooks let cmlab's side of runFeedbackBench grow its store faster
// and read its log around the timed POSTs; the peer's side has none.
type benchHooks struct {
	grow growFunc // nil: through POST /api/feedback
	// beforePosts and afterPosts run right before and after the timed POSTs.
	beforePosts, afterPosts func()
}

// growFunc grows the Lab store behind p from have to n lines (tag names
// the run); nil means through POST /api/feedback.
type growFunc func(ctx context.Context, p *peerClient, tag string, have, n int) error

// runFeedbackBench is the one load both sides of `cmlab bench api` get,
// through the wire contract only (a peerClient: the token from GET
// /api/config, browser headers): poll sizes up to o.Requests lines are
// built and polled first, then o.Requests POST /api/feedback from
// o.Clients clients (each with its own request id) are timed, then the
// larger sizes are built and polled. Every poll is a GET /api/feedback
// over HTTP with the cursor at the start of the store's last line.
func runFeedbackBench(ctx context.Context, o PeerOptions, h benchHooks) (*PeerResult, error) {
	if o.Clients <= 0 {
		o.Clients = 32
	}
	if o.Requests <= 0 {
		o.Requests = 20000
	}
	if o.PollReps <= 0 {
		o.PollReps = 200
	}
	if err := checkClient(o.Client); err != nil {
		return nil, err
	}
	if o.Client == "" {
		o.Client = ClientNetHTTP
	}
	p, err := newPeerClient(ctx, o.URL, o.Clients)
	if err != nil {
		return nil, err
	}
	defer p.hc.CloseIdleConnections()
	if o.Client == ClientRaw && !strings.HasPrefix(p.base, "http://") {
		return nil, fmt.Errorf("--client %s speaks plain http only, not %s", ClientRaw, p.base)
	}
	runTag := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	res := &PeerResult{URL: p.base, Clients: o.Clients, Requests: o.Requests, Client: o.Client}
	sizes := append([]int(nil), o.PollLines...)
	sort.Ints(sizes)
	poll := func(n int) error {
		if o.MaxBuildLines > 0 && n > o.MaxBuildLines {
			res.Skipped = append(res.Skipped, n)
			return nil
		}
		pb, err := p.pollAt(ctx, runTag, n, o.Clients, o.PollReps, h.grow)
		if err != nil {
			return err
		}
		res.Polls = append(res.Polls, pb)
		return nil
	}
	i := 0
	for ; i < len(sizes) && sizes[i] <= o.Requests; i++ {
		if err := poll(sizes[i]); err != nil {
			return res, err
		}
	}
	if h.beforePosts != nil {
		h.beforePosts()
	}
	lat, errs, el := p.postWith(ctx, o.Client, runTag, o.Requests, o.Clients)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h.afterPosts != nil {
		h.afterPosts()
	}
	res.Errors, res.ElapsedNs = errs, int64(el)
	fillLatency(res, lat, el)
	if errs == int64(o.Requests) {
		return res, fmt.Errorf("%w: every POST /api/feedback failed", ErrPeer)
	}
	for ; i < len(sizes); i++ {
		if err := poll(sizes[i]); err != nil {
			return res, err
		}
	}
	return res, nil
}

// fillLatency sets r's rate and latency figures from the latencies of
// its POSTs (sorted in place) and their elapsed time; r.Errors is set.
func fillLatency(r *PeerResult, lat []time.Duration, el time.Duration) {
	r.EventsPerS = float64(len(lat)-int(r.Errors)) / el.Seconds()
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	r.MeanMs = ms(sum / time.Duration(len(lat)))
	r.P50Ms, r.P99Ms, r.MaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
}

// pollAt grows the store to at least n lines (through grow, or POST
// /api/feedback when it is nil), finds the start of its last line by paging with nextCursor, then times
// polls from there (each must return exactly that one line).
func (p *peerClient) pollAt(ctx context.Context, tag string, n, clients, reps int, grow growFunc) (PollBench, error) {
	have, last, size, err := p.scan(ctx)
	if err != nil {
		return PollBench{}, err
	}
	if have < n {
		if grow != nil {
			err = grow(ctx, p, tag, have, n)
		} else if _, errs, _ := p.post(ctx, fmt.Sprintf("%s-fill%d", tag, n), n-have, clients, nil); errs > 0 {
			err = fmt.Errorf("%w: %d POSTs failed while building %d lines", ErrPeer, errs, n)
		}
		if err != nil {
			return PollBench{}, err
		}
		if have, last, size, err = p.scan(ctx); err != nil {
			return PollBench{}, err
		}
	}
	times := make([]time.Duration, reps)
	path := "/api/feedback?since=" + last
	for i := range times {
		t0 := time.Now()
		st, body, err := p.do(ctx, "GET", path, "", "")
		times[i] = time.Since(t0)
		if err != nil {
			return PollBench{}, err
		}
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if st != 200 || json.Unmarshal(body, &page) != nil || len(page.Items) != 1 {
			return PollBench{}, fmt.Errorf("%w: poll at end of %d lines: status %d, body %.200q", ErrPeer, have, st, body)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return PollBench{Size: n, Lines: have, Bytes: size, MedianUs: float64(times[len(times)/2].Nanoseconds()) / 1000,
		P99Us: float64(times[len(times)*99/100].Nanoseconds()) / 1000}, nil
}

// scan pages through the whole store (limit 500) and returns its line
// count, the cursor of its last line's start and the final cursor.
func (p *peerClient) scan(ctx context.Context) (lines int, lastStart string, size int64, err error) {
	cur, prev := "0", "0"
	for {
		page, st, body, err := p.feedbackAfter(ctx, cur, 500)
		if err != nil {
			return 0, "", 0, err
		}
		if page == nil {
			return 0, "", 0, fmt.Errorf("%w: GET /api/feedback?since=%s: status %d, body %.200q", ErrPeer, cur, st, body)
		}
		if len(page.Items) == 0 {
			break
		}
		lines += len(page.Items)
		prev, cur = cur, page.NextCursor
	}
	if lines == 0 {
		return 0, "0", 0, nil
	}
	// prev is the start of the last non-empty page; walk it one line at a time.
	c := prev
	for {
		page, st, _, err := p.feedbackAfter(ctx, c, 1)
		if err != nil {
			return 0, "", 0, err
		}
		if page == nil {
			return 0, "", 0, fmt.Errorf("%w: GET /api/feedback?since=%s&limit=1: status %d", ErrPeer, c, st)
		}
		if page.NextCursor == cur {
			var sz int64
			fmt.Sscan(cur, &sz)
			return lines, c, sz, nil
		}
		c = page.NextCursor
	}
}

// feedbackPage is an answer of GET /api/feedback.
type feedbackPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"nextCursor"`
}

// feedbackAfter reads at most limit feedback lines after cursor since;
// page is nil when the answer is not a 200 with a page (st and body say
// what came instead).
func (p *peerClient) feedbackAfter(ctx context.Context, since string, limit int) (page *feedbackPage, st int, body []byte, err error) {
	st, body, err = p.do(ctx, "GET", "/api/feedback?since="+since+"&limit="+strconv.Itoa(limit), "", "")
	if err != nil {
		return nil, 0, nil, err
	}
	page = &feedbackPage{}
	if st != 200 || json.Unmarshal(body, page) != nil {
		return nil, st, body, nil
	}
	return page, st, body, nil
}

package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// client is the harness's HTTP client for one daemon life.
type client struct {
	base  string
	token string
	hc    *http.Client

	mu       sync.Mutex
	errs     int    // transport errors
	firstErr string // the first one, for the round's report
}

func (c *client) noteErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs++
	if c.firstErr == "" {
		c.firstErr = err.Error()
	}
}

func newClient(d *daemon) *client {
	// Enough idle connections for every load client, so requests reuse
	// connections instead of churning loopback ports.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	return &client{base: d.base, token: d.token, hc: &http.Client{Timeout: 30 * time.Second, Transport: tr}}
}

// reply is one HTTP answer. A transport error (daemon killed mid-request)
// is err != nil with status 0: the outcome of the request is unknown.
type reply struct {
	status int
	body   []byte
	replay bool // X-CM-LAB-IDEMPOTENT-REPLAY: true
	err    error
}

func (r reply) ok() bool { return r.err == nil && r.status == http.StatusOK }

// errCode is the envelope's error code, "" when there is none.
func (r reply) errCode() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(r.body, &env) != nil {
		return ""
	}
	return env.Error.Code
}

func (r reply) String() string {
	if r.err != nil {
		return "transport error: " + r.err.Error()
	}
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

func (c *client) do(ctx context.Context, method, path, reqID string, body []byte) reply {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("X-CM-LAB-TOKEN", c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if reqID != "" {
		req.Header.Set("X-CM-LAB-REQUEST-ID", reqID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.noteErr(err)
		}
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{status: resp.StatusCode, err: err}
	}
	return reply{status: resp.StatusCode, body: b, replay: resp.Header.Get("X-CM-LAB-IDEMPOTENT-REPLAY") == "true"}
}

func (c *client) get(ctx context.Context, path string) reply { return c.do(ctx, "GET", path, "", nil) }

func (c *client) post(ctx context.Context, path, reqID string, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		return reply{err: err}
	}
	return c.do(ctx, "POST", path, reqID, b)
}

// walIndex reads /api/health's walIndex.
func (c *client) health(ctx context.Context) (status string, walIndex uint64, err error) {
	r := c.get(ctx, "/api/health")
	if r.err != nil {
		return "", 0, r.err
	}
	var h struct {
		Status   string `json:"status"`
		Cause    string `json:"cause"`
		WalIndex uint64 `json:"walIndex"`
	}
	if err := json.Unmarshal(r.body, &h); err != nil {
		return "", 0, fmt.Errorf("health: %v: %s", err, r.body)
	}
	if h.Cause != "" {
		h.Status += " (" + h.Cause + ")"
	}
	return h.Status, h.WalIndex, nil
}

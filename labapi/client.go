package labapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/home"
)

// DaemonInfo is state/daemon.json: how CLI commands find the running
// daemon. serve writes it once it listens and removes it on clean shutdown.
//
// Nonce is drawn per daemon run and echoed by its GET /api/health; a
// client sends a token only to a listener that echoes it (a stale file
// whose pid and port were reused by another program gets nothing). It is
// not a secret: it proves only that the listener read this file, which
// only the home's owner can.
type DaemonInfo struct {
	Pid       int    `json:"pid"`
	Listen    string `json:"listen"`
	TokenFile string `json:"tokenFile"`
	Nonce     string `json:"nonce"`
	SessionID string `json:"sessionId,omitempty"`
	StartedAt string `json:"startedAt,omitempty"`
	Version   string `json:"version,omitempty"`
}

// ErrNoDaemon is returned by ReadDaemonInfo when no daemon runs for a home.
var ErrNoDaemon = errors.New("no running daemon")

// WriteDaemonInfo replaces state/daemon.json atomically.
func WriteDaemonInfo(h home.Home, info DaemonInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(h.DaemonFile(), append(b, '\n'))
}

// RemoveDaemonInfo removes state/daemon.json if it still names pid.
func RemoveDaemonInfo(h home.Home, pid int) error {
	b, err := os.ReadFile(h.DaemonFile())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var info DaemonInfo
	if json.Unmarshal(b, &info) == nil && info.Pid != pid {
		return nil // a newer daemon owns it
	}
	if err := os.Remove(h.DaemonFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return home.SyncDir(h.StateDir())
}

// ReadDaemonInfo returns the running daemon of h. A missing file, an
// unreadable one, a dead pid, or a listener that is not this home's
// daemon (it refuses connections, or its /api/health does not echo the
// file's nonce) all mean ErrNoDaemon. Nothing secret is sent to the
// listener to find out.
func ReadDaemonInfo(h home.Home) (*DaemonInfo, error) {
	b, err := os.ReadFile(h.DaemonFile())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNoDaemon
		}
		return nil, err
	}
	var info DaemonInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Pid <= 0 || info.Listen == "" || info.Nonce == "" {
		return nil, ErrNoDaemon
	}
	if !pidAlive(info.Pid) {
		return nil, ErrNoDaemon
	}
	// A killed daemon's pid and port may have been reused: the listener is
	// ours only if it echoes the nonce.
	if !daemonEchoesNonce(info.Listen, info.Nonce) {
		return nil, ErrNoDaemon
	}
	return &info, nil
}

// daemonEchoesNonce asks listen's GET /api/health, with no token, whether
// it is the daemon that wrote nonce.
func daemonEchoesNonce(listen, nonce string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, NewClient(listen, "").base+"/api/health", nil)
	if err != nil {
		return false
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h Health
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h) != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h.Nonce), []byte(nonce)) == 1
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Client talks to the Lab API: over HTTP to a running daemon, or in-process
// to a Server built on an engine opened by this process. Both paths run the
// same handlers, so validation and errors are identical.
type Client struct {
	base  string // "http://host:port"
	token string
	hc    *http.Client
	local http.Handler // in-process when non-nil
	// Remote is true when the client talks to a running daemon.
	Remote bool
}

// NewClient returns a client for the daemon at listen ("host:port" or a
// URL) authenticating with token.
func NewClient(listen, token string) *Client {
	base := listen
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{}, Remote: true}
}

// NewLocalClient returns a client that calls h in-process.
func NewLocalClient(h http.Handler, token string) *Client {
	return &Client{base: "http://127.0.0.1", token: token, local: h}
}

// BaseURL is the daemon's base URL ("http://127.0.0.1" in-process).
func (c *Client) BaseURL() string { return c.base }

// Token is the bearer token the client sends.
func (c *Client) Token() string { return c.token }

// DialOptions configure Dial.
type DialOptions struct {
	// InProcess opens the home in this process when no daemon runs for
	// it (package daemon's in-process home: engine, journal, read models
	// and server, built as the daemon builds them). Required.
	InProcess func(ctx context.Context) (*Client, func() error, error)
}

// Dial returns a client for home h: the running daemon when state/daemon.json
// names a live one (authenticating with the operator token of state/token),
// else opts.InProcess's in-process server (daemon.Dial supplies it).
// closeFn releases what Dial opened; call it once the command is done.
func Dial(ctx context.Context, h home.Home, opts DialOptions) (*Client, func() error, error) {
	if info, err := ReadDaemonInfo(h); err == nil {
		tok, err := ReadOperatorToken(h, info)
		if err != nil {
			return nil, nil, err
		}
		return NewClient(info.Listen, tok), func() error { return nil }, nil
	} else if !errors.Is(err, ErrNoDaemon) {
		return nil, nil, err
	}
	if opts.InProcess == nil {
		return nil, nil, errors.New("labapi: no daemon runs for " + h.Dir + " and DialOptions.InProcess is nil")
	}
	return opts.InProcess(ctx)
}

// ReadOperatorToken reads the operator token of the running daemon info
// (state/token of h unless daemon.json names another file). The error
// names the file and why it cannot be read, never the token.
func ReadOperatorToken(h home.Home, info *DaemonInfo) (string, error) {
	tf := info.TokenFile
	if tf == "" {
		tf = h.TokenFile()
	}
	b, err := os.ReadFile(tf)
	if err != nil {
		return "", fmt.Errorf("daemon pid %d runs but its operator token is unreadable: %w; fix: run the command as the user who owns %s", info.Pid, err, h.Dir)
	}
	return strings.TrimSpace(string(b)), nil
}

// Do sends one request. in is nil, []byte / json.RawMessage (sent as is) or
// a value to encode as JSON; out, when non-nil, receives the decoded 2xx
// body (*json.RawMessage keeps it raw). reqID, when non-empty, goes in
// X-CM-LAB-REQUEST-ID. A non-2xx answer is returned as *APIError with the
// envelope's code, message and context (fix included).
func (c *Client) Do(ctx context.Context, method, path, reqID string, in, out any) error {
	var body io.Reader
	if in != nil {
		switch v := in.(type) {
		case []byte:
			body = bytes.NewReader(v)
		case json.RawMessage:
			body = bytes.NewReader(v)
		default:
			b, err := json.Marshal(in)
			if err != nil {
				return err
			}
			body = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("X-CM-LAB-TOKEN", c.token)
	}
	if reqID != "" {
		req.Header.Set("X-CM-LAB-REQUEST-ID", reqID)
	}
	status, respBody, err := c.roundTrip(req)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return DecodeError(status, respBody)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], bytes.TrimSpace(respBody)...)
		return nil
	}
	if err := json.Unmarshal(respBody, out); err != nil {
		return fmt.Errorf("decoding %s %s response: %w", method, path, err)
	}
	return nil
}

func (c *Client) roundTrip(req *http.Request) (int, []byte, error) {
	if c.local != nil {
		rec := httptest.NewRecorder()
		req.RemoteAddr = "127.0.0.1:0"
		req.RequestURI = req.URL.RequestURI()
		c.local.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes(), nil
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("daemon at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("daemon at %s: reading response: %w", c.base, err)
	}
	return resp.StatusCode, b, nil
}

// DecodeError turns an error response into *APIError; a body that is not
// the envelope becomes an INTERNAL error naming the status.
func DecodeError(status int, body []byte) error {
	var env struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Context map[string]any `json:"context"`
		} `json:"error"`
	}
	// The terminal's refusal body (seed 001): {ok:false, error:"busy"|…, message}.
	var refusal struct {
		OK      *bool  `json:"ok"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if status == http.StatusConflict && json.Unmarshal(body, &refusal) == nil && refusal.OK != nil && !*refusal.OK && refusal.Error != "" {
		return &APIError{Code: CodeBusy, Message: strings.TrimPrefix(refusal.Message, refusal.Error+": "), Context: map[string]any{}}
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil || env.Error.Code == "" {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return &APIError{Code: CodeInternal, Message: fmt.Sprintf("HTTP %d: %s", status, msg), Context: map[string]any{}}
	}
	ctx := env.Error.Context
	if ctx == nil {
		ctx = map[string]any{}
	}
	return &APIError{Code: env.Error.Code, Message: env.Error.Message, Context: ctx}
}

// Fix is the context.fix of an API error, or "".
func (e *APIError) Fix() string {
	if s, ok := e.Context["fix"].(string); ok {
		return s
	}
	return ""
}

// DefaultAllowedRoots are the working directory, its output/ and extra.
func DefaultAllowedRoots(extra []string) []string {
	var roots []string
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, wd, wd+string(os.PathSeparator)+"output")
	}
	return append(roots, extra...)
}

// waitHealthy polls /api/health until it answers or ctx ends (tests, serve).
func (c *Client) waitHealthy(ctx context.Context) error {
	for {
		if err := c.Do(ctx, http.MethodGet, "/api/health", "", nil, nil); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

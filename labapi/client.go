package labapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi/wire"
)

// DaemonInfo is state/daemon.json: how CLI commands find the running
// daemon. serve writes it once it listens and removes it on clean shutdown
// (Advertise, Withdraw).
//
// Nothing in it is trusted alone: a killed daemon leaves it behind, and
// its pid and port may then belong to anyone. The daemon is live only
// while it holds state/daemon.lock and its pid runs with the recorded
// start time in the recorded boot (package discovery); clients then talk
// to it over Socket only, after checking the listener's credentials.
type DaemonInfo struct {
	Pid       int    `json:"pid"`
	Listen    string `json:"listen"`
	TokenFile string `json:"tokenFile"`
	// Socket is state/daemon.sock: the CLI's only way to the daemon.
	Socket string `json:"socket"`
	// PidStart is field 22 of /proc/PID/stat, BootID the boot it ran in.
	PidStart  uint64 `json:"pidStart"`
	BootID    string `json:"bootId"`
	SessionID string `json:"sessionId,omitempty"`
	StartedAt string `json:"startedAt,omitempty"`
	Version   string `json:"version,omitempty"`
	// AllowedRoots are the import roots (callers read only what they could
	// read themselves); UnknownPeerRoots those of a caller whose uid the
	// kernel does not tell (exposure.go).
	AllowedRoots     []string `json:"allowedRoots,omitempty"`
	UnknownPeerRoots []string `json:"unknownPeerRoots,omitempty"`
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

// ReadDaemonInfo returns the running daemon of h. A missing file is
// ErrNoDaemon; a file whose daemon is gone (its lock is free, its pid
// runs another process or none) is a *StaleDaemonError, which is
// ErrNoDaemon too and says why. Nothing is sent to any listener to find
// out.
func ReadDaemonInfo(h home.Home) (*DaemonInfo, error) {
	b, err := os.ReadFile(h.DaemonFile())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNoDaemon
		}
		return nil, err
	}
	var info DaemonInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Pid <= 0 || info.Listen == "" {
		return nil, &StaleDaemonError{Pid: info.Pid, Why: "it is not a daemon record"}
	}
	if err := checkLive(h, &info); err != nil {
		return nil, err
	}
	return &info, nil
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
// names a live one (reached over its Unix socket, authenticating with the
// operator token of state/token), else opts.InProcess's in-process server
// (daemon.Dial supplies it). closeFn releases what Dial opened; call it
// once the command is done.
func Dial(ctx context.Context, h home.Home, opts DialOptions) (*Client, func() error, error) {
	if info, err := ReadDaemonInfo(h); err == nil {
		tok, err := ReadOperatorToken(h, info)
		if err != nil {
			return nil, nil, err
		}
		// The operator token goes over the daemon's Unix socket only.
		c := NewClient(info.Listen, tok)
		tr := socketTransport(h)
		c.hc = &http.Client{Transport: tr}
		return c, func() error { tr.CloseIdleConnections(); return nil }, nil
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
	var body []byte
	switch v := in.(type) {
	case nil:
	case []byte:
		body = v
	case json.RawMessage:
		body = v
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	if in != nil && body == nil {
		body = []byte{} // sent as an empty JSON body, as given
	}
	req, err := wire.NewRequest(ctx, method, c.base+path, c.token, reqID, body)
	if err != nil {
		return err
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
		status, body := wire.ServeLocal(c.local, req)
		return status, body, nil
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
	if status == http.StatusConflict {
		if ref, ok := wire.DecodeRefusal(body); ok {
			return &APIError{Code: CodeBusy, Message: strings.TrimPrefix(ref.Message, ref.Reason+": "), Context: map[string]any{}}
		}
	}
	env, ok := wire.DecodeEnvelope(body)
	if !ok {
		return &APIError{Code: CodeInternal, Message: wire.Unexpected(status, body), Context: map[string]any{}}
	}
	return &APIError{Code: env.Code, Message: env.Message, Context: env.Context}
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

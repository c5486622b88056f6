package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"

	"github.com/cmlab/cmlab/labapi/wire"
)

// ErrUnreachable is wrapped by calls that never got an HTTP answer from
// the daemon (connection refused, daemon gone).
var ErrUnreachable = errors.New("daemon unreachable")

// maxResponse bounds a response body read from a remote daemon.
const maxResponse = 64 << 20

// Daemon is the narrow backend every tool goes through: one HTTP request
// against the daemon's API, either to an http.Handler in this process (the
// /mcp route, or `cmlab mcp` with an engine of its own) or to a running
// daemon over loopback. Either way the same route code validates, dedupes
// and appends, so a tool can never do what the HTTP API would refuse.
type Daemon struct {
	handler http.Handler // in-process when non-nil
	hc      *http.Client
	resolve Resolver // remote: finds the daemon again after a failed dial

	mu    sync.Mutex
	base  string // "http://host:port" when remote
	token string
}

// Resolver names the running daemon: its listen address ("host:port" or a
// URL) and token.
type Resolver func() (baseURL, token string, err error)

// InProcess returns a backend that calls h directly with token.
func InProcess(h http.Handler, token string) *Daemon {
	return &Daemon{handler: h, base: "http://127.0.0.1", token: token}
}

// Remote returns a backend for the daemon listening at baseURL ("host:port"
// or "http://host:port") that authenticates with token.
func Remote(baseURL, token string) *Daemon {
	return &Daemon{base: normalizeBase(baseURL), token: token, hc: &http.Client{}}
}

// Resolving returns a backend for the daemon resolve names now. When a
// request cannot even connect (the daemon restarted on another port, or
// with a new token file), it asks resolve again and, if the answer
// changed, sends the request once more: a refused connection carried
// nothing, so even a mutation cannot act twice.
func Resolving(resolve Resolver) (*Daemon, error) {
	base, tok, err := resolve()
	if err != nil {
		return nil, err
	}
	d := Remote(base, tok)
	d.resolve = resolve
	return d, nil
}

// ResolvingVia is Resolving with requests sent through hc: `cmlab mcp`
// passes a client whose transport reaches the daemon over its Unix socket
// only (labapi.SocketHTTPClient), so the token never crosses TCP.
func ResolvingVia(resolve Resolver, hc *http.Client) (*Daemon, error) {
	d, err := Resolving(resolve)
	if err != nil {
		return nil, err
	}
	d.hc = hc
	return d, nil
}

func normalizeBase(b string) string {
	if !strings.HasPrefix(b, "http://") && !strings.HasPrefix(b, "https://") {
		b = "http://" + b
	}
	return strings.TrimRight(b, "/")
}

func (d *Daemon) target() (base, token string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.base, d.token
}

// reresolve asks the resolver again; it reports whether the target changed.
func (d *Daemon) reresolve() bool {
	if d.resolve == nil {
		return false
	}
	base, tok, err := d.resolve()
	if err != nil {
		return false
	}
	base = normalizeBase(base)
	d.mu.Lock()
	defer d.mu.Unlock()
	if base == d.base && tok == d.token {
		return false
	}
	d.base, d.token = base, tok
	return true
}

// CallError is an error answer of the daemon: its envelope
// {"error":{"code","message","context":{"fix",…}}} and HTTP status.
type CallError struct {
	Status  int
	Code    string
	Message string
	Context map[string]any
}

func (e *CallError) Error() string { return e.Code + ": " + e.Message }

// Fix is context.fix, or "".
func (e *CallError) Fix() string {
	s, _ := e.Context["fix"].(string)
	return s
}

// request is one call a tool makes.
type request struct {
	method string
	path   string
	query  url.Values
	body   any // nil, or a value encoded as JSON
	reqID  string
}

// call performs r and returns the 2xx body; an error answer is *CallError.
// Cancelling ctx cancels the HTTP request, which ends a long wait_for on
// the daemon's side.
func (d *Daemon) call(ctx context.Context, r request) (json.RawMessage, error) {
	b, err := d.callOnce(ctx, r)
	if errors.Is(err, errNotConnected) && d.reresolve() {
		b, err = d.callOnce(ctx, r)
	}
	return b, err
}

// errNotConnected marks a remote request that never reached the daemon.
var errNotConnected = errors.New("connection refused")

func (d *Daemon) callOnce(ctx context.Context, r request) (json.RawMessage, error) {
	base, token := d.target()
	u := base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("encoding request body: %w", err)
		}
		body = b
	}
	req, err := wire.NewRequest(ctx, r.method, u, token, r.reqID, body)
	if err != nil {
		return nil, err
	}
	status, respBody, err := d.roundTrip(req)
	if err != nil {
		return nil, err
	}
	if status < 200 || status > 299 {
		return nil, decodeError(status, respBody)
	}
	respBody = bytes.TrimSpace(respBody)
	if len(respBody) == 0 {
		respBody = []byte("{}")
	}
	if !json.Valid(respBody) {
		return nil, &CallError{Status: status, Code: "INTERNAL", Message: fmt.Sprintf("%s %s answered %d with a body that is not JSON", r.method, r.path, status),
			Context: map[string]any{"fix": "Check the daemon log; this is a bug in the route."}}
	}
	return respBody, nil
}

func (d *Daemon) roundTrip(req *http.Request) (int, []byte, error) {
	if d.handler != nil {
		status, body := wire.ServeLocal(d.handler, req)
		return status, body, nil
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return 0, nil, ctxErr
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w: %w", errNotConnected, err)
		}
		return 0, nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, req.URL.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return 0, nil, ctxErr
		}
		return 0, nil, fmt.Errorf("%w at %s: reading response: %v", ErrUnreachable, req.URL.Host, err)
	}
	return resp.StatusCode, b, nil
}

// decodeError reads the error envelope; a body that is not one becomes
// INTERNAL naming the status.
func decodeError(status int, body []byte) *CallError {
	env, ok := wire.DecodeEnvelope(body)
	if !ok {
		if ce := decodeRefusal(status, body); ce != nil {
			return ce
		}
		code := "INTERNAL"
		fix := "Check the daemon log."
		if status == http.StatusNotFound {
			code, fix = "NOT_FOUND", "This daemon does not serve the route; upgrade cmlab or check the conversation and block ids."
		}
		return &CallError{Status: status, Code: code, Message: wire.Unexpected(status, body), Context: map[string]any{"fix": fix}}
	}
	return &CallError{Status: status, Code: env.Code, Message: env.Message, Context: env.Context}
}

// decodeRefusal reads the terminal's refusal body of seed 001 §5.1,
// {"ok":false,"error":"busy"|"interactive mode","message":…} (HTTP 409),
// as a BUSY error whose message says which and whose fix says what to do.
func decodeRefusal(status int, body []byte) *CallError {
	ref, ok := wire.DecodeRefusal(body)
	if !ok {
		return nil
	}
	// The message usually starts with the reason ("busy: block … is
	// running"): say it once (was "busy: busy: block …").
	msg := ref.Reason
	switch {
	case strings.HasPrefix(ref.Message, ref.Reason):
		msg = ref.Message
	case ref.Message != "":
		msg += ": " + ref.Message
	}
	fix := "Wait for the running command (pty_wait_prompt, or pty_wait_for with match_type prompt), then retry."
	if strings.Contains(ref.Reason, "interactive") {
		fix = "An interactive session is open: drive it to its end and call pty_wait_prompt, or stop it with pty_end_session; then retry."
	}
	code := "BUSY"
	if status != http.StatusConflict {
		code = "INVALID_ARGUMENT"
		fix = "Check the request; the terminal refused it."
	}
	return &CallError{Status: status, Code: code, Message: msg, Context: map[string]any{"fix": fix, "reason": ref.Reason}}
}

package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
)

// The API's request headers: the bearer token and the request id that
// makes a retry safe.
const (
	TokenHeader     = "X-CM-LAB-TOKEN"
	RequestIDHeader = "X-CM-LAB-REQUEST-ID"
)

// NewRequest builds one API request to url: body, when non-nil, sent as
// JSON; token and reqID in their headers when non-empty.
func NewRequest(ctx context.Context, method, url, token, reqID string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	if reqID != "" {
		req.Header.Set(RequestIDHeader, reqID)
	}
	return req, nil
}

// ServeLocal answers req with h in this process, handing it over as the
// daemon's HTTP server would: a body even when there is none, a loopback
// peer, the request URI set. It returns the status and body of the answer.
func ServeLocal(h http.Handler, req *http.Request) (int, []byte) {
	rec := httptest.NewRecorder()
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RemoteAddr = "127.0.0.1:0"
	req.RequestURI = req.URL.RequestURI()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// Envelope is the error body of an API answer.
type Envelope struct {
	Code    string
	Message string
	// Context holds the error's details, "fix" among them; never nil.
	Context map[string]any
}

// DecodeEnvelope reads body as the error envelope; ok is false when it is
// not one or names no code.
func DecodeEnvelope(body []byte) (env Envelope, ok bool) {
	var e struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Context map[string]any `json:"context"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Code == "" {
		return Envelope{}, false
	}
	env = Envelope{Code: e.Error.Code, Message: e.Error.Message, Context: e.Error.Context}
	if env.Context == nil {
		env.Context = map[string]any{}
	}
	return env, true
}

// Unexpected names an answer whose body is neither error body: its status
// and the first 200 bytes of the body.
func Unexpected(status int, body []byte) string {
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return fmt.Sprintf("HTTP %d: %s", status, msg)
}

// Refusal is the terminal's refusal of a request (seed 001 §5.1, HTTP
// 409 when it is busy or in interactive mode).
type Refusal struct {
	Reason  string // its "error": "busy", "interactive mode", …
	Message string
}

// DecodeRefusal reads body as the terminal's refusal
// {"ok":false,"error":reason,"message":…}; ok is false when it is not one.
func DecodeRefusal(body []byte) (ref Refusal, ok bool) {
	var r struct {
		OK      *bool  `json:"ok"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &r) != nil || r.OK == nil || *r.OK || r.Error == "" {
		return Refusal{}, false
	}
	return Refusal{Reason: r.Error, Message: r.Message}, true
}

package labapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"syscall"

	"github.com/cmlab/cmlab/engine"
)

// Error codes of the envelope {"error":{"code","message","context":{"fix",…}}}.
const (
	CodeInvalidArgument      = "INVALID_ARGUMENT"
	CodeInvalidCursor        = "INVALID_CURSOR"
	CodeInvalidJSON          = "INVALID_JSON"
	CodeUnauthorized         = "UNAUTHORIZED"
	CodeForbidden            = "FORBIDDEN"
	CodeNotFound             = "NOT_FOUND"
	CodeFileNotFound         = "FILE_NOT_FOUND"
	CodeBusy                 = "BUSY"
	CodeIdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeDegraded             = "DEGRADED"
	// CodeInsufficientStorage: a bounded store (lab/exports/) is full.
	CodeInsufficientStorage = "INSUFFICIENT_STORAGE"
	// CodeUnavailable: a transient shortage (file descriptors, views not
	// yet caught up with the log); nothing was changed, retry after the
	// Retry-After header's seconds. Never a log failure.
	CodeUnavailable = "UNAVAILABLE"
	CodeInternal    = "INTERNAL"
)

// statusOf is the one mapping from error codes to HTTP status.
var statusOf = map[string]int{
	CodeInvalidArgument:      http.StatusBadRequest,
	CodeInvalidCursor:        http.StatusBadRequest,
	CodeInvalidJSON:          http.StatusBadRequest,
	CodeUnauthorized:         http.StatusUnauthorized,
	CodeForbidden:            http.StatusForbidden,
	CodeNotFound:             http.StatusNotFound,
	CodeFileNotFound:         http.StatusNotFound,
	CodeBusy:                 http.StatusConflict,
	CodeIdempotencyKeyReused: http.StatusConflict,
	CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	CodeDegraded:             http.StatusServiceUnavailable,
	CodeInsufficientStorage:  http.StatusInsufficientStorage,
	CodeUnavailable:          http.StatusServiceUnavailable,
	CodeInternal:             http.StatusInternalServerError,
}

// APIError is an error with its envelope code, message and context.
type APIError struct {
	Code    string
	Message string
	Context map[string]any
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Status is the HTTP status of the error's code.
func (e *APIError) Status() int {
	if s, ok := statusOf[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// NewError builds an APIError; fix, when non-empty, goes to context.fix.
func NewError(code, message, fix string) *APIError {
	e := &APIError{Code: code, Message: message, Context: map[string]any{}}
	if fix != "" {
		e.Context["fix"] = fix
	}
	return e
}

// With adds a context field.
func (e *APIError) With(key string, v any) *APIError {
	e.Context[key] = v
	return e
}

// retryAfterSeconds is the Retry-After of UNAVAILABLE answers.
const retryAfterSeconds = "1"

// isFDShortage reports whether err is the process or the system running
// out of file descriptors (EMFILE, ENFILE): transient, never a log failure.
func isFDShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// unavailableFDs is the answer to a request that could not open a file
// because descriptors ran out.
func unavailableFDs(err error) *APIError {
	return NewError(CodeUnavailable, "out of file descriptors: "+err.Error(),
		"Retry shortly; if it persists, lower serve's --max-conns or raise the daemon's open-file limit (ulimit -n). Nothing was changed and the log is not affected.")
}

// transientFileError is the answer to a failed open of a run file when the
// failure is transient (descriptors ran out); nil otherwise.
func transientFileError(err error) *APIError {
	if isFDShortage(err) {
		return unavailableFDs(err)
	}
	return nil
}

// asAPIError turns any error into an APIError; unknown errors are INTERNAL,
// except a shortage of file descriptors (UNAVAILABLE) and views that cannot
// yet catch up with the log (UNAVAILABLE, engine.ErrViewsBehind).
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	if isFDShortage(err) {
		return unavailableFDs(err)
	}
	if errors.Is(err, engine.ErrViewsBehind) {
		return NewError(CodeUnavailable, err.Error(),
			"Retry shortly with the same request id: the views are being brought up to the log, which holds every acknowledged write. Nothing was changed by this request.")
	}
	return NewError(CodeInternal, err.Error(), "Check the daemon log; retry with the same request id.")
}

type errorBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Context map[string]any `json:"context"`
	} `json:"error"`
}

// writeError writes the envelope for err.
func writeError(w http.ResponseWriter, err error) {
	ae := asAPIError(err)
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Context = ae.Code, ae.Message, ae.Context
	if b.Error.Context == nil {
		b.Error.Context = map[string]any{}
	}
	if ae.Code == CodeUnavailable && w.Header().Get("Retry-After") == "" { // a route may set its own
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeJSON(w, ae.Status(), b)
}

// writeJSON writes v with the headers every response carries.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"INTERNAL","message":"response encoding failed","context":{}}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

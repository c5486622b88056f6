package labapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
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

// Scopes of the error table: the routes a row answers for.
type errScope uint8

const (
	onTerminal errScope = 1 << iota // the terminal's routes (/api/pty)
	onSteps                         // the step routes (/api/steps)
	onApprove                       // a step's approval (with onSteps' rows after its own)
	onAppend                        // any route's append (Server.appendEvent)
	onAny                           // every answer, last (asAPIError)
)

// errRow maps the errors is (errors.Is) to an envelope for the routes of
// scope: code, message and fix; or answer, when the envelope depends on
// the error's cause.
type errRow struct {
	scope errScope
	is    []error
	code  string
	// msg is the message: "" the error's own text, else this, its %s
	// replaced by the error's text.
	msg    string
	fix    string
	answer func(err error) *APIError
}

// errTable is the one mapping from the errors of the packages below to
// the envelope and its HTTP status (statusOf). The first row of the
// caller's scope whose error matches answers, so rows keep the order in
// which a route checks them. An *APIError passes through unchanged; an
// error no row names is INTERNAL.
var errTable = []errRow{
	{scope: onApprove, is: []error{steps.ErrInFlight}, code: CodeBusy,
		fix: "Wait for the step's process to end (or stop it), then approve again."},
	{scope: onApprove, is: []error{recovery.ErrNoWorld}, code: CodeInvalidArgument, msg: "%s: there is no world to hash",
		fix: "Record the completion with its hashes instead: cmlab step complete MANDATE STEP --post HASH --result HASH."},
	{scope: onTerminal, is: []error{pty.ErrInvalidCursor}, code: CodeInvalidCursor,
		fix: "Use the resume_cursor of your last wait_for or read_spool, or status.resume_cursor."},
	{scope: onTerminal, is: []error{pty.ErrInvalidArgument}, code: CodeInvalidArgument,
		fix: "Fix the request field named in the message."},
	{scope: onTerminal, is: []error{pty.ErrNotFound}, code: CodeNotFound,
		fix: "List the blocks with GET /api/pty/{conversationId}/blocks."},
	{scope: onTerminal, is: []error{pty.ErrTooManyShells}, code: CodeBusy,
		fix: "End a conversation you no longer use (POST /api/pty/{conversationId}/end_session frees its shell; GET /api/pty lists them), wait for idle shells to be reaped, or raise the limit."},
	{scope: onSteps, is: []error{steps.ErrUnknownMandate, steps.ErrUnknownStep}, code: CodeNotFound,
		fix: "Plan the mandate first (POST /api/steps/{mandateId}/plan) and use a step_id of its plan."},
	{scope: onSteps, is: []error{steps.ErrInvalidTransition}, code: CodeInvalidArgument,
		fix: "GET /api/steps?mandateId= shows each step's status; follow pending → executing → completed|failed."},
	{scope: onSteps, is: []error{steps.ErrInvalidStep}, code: CodeInvalidArgument,
		fix: "Hashes are \"sha256-\" and 64 lowercase hex digits; ids match [A-Za-z0-9_.-]{1,128}."},
	{scope: onTerminal | onSteps | onAppend, is: []error{wal.ErrFailed}, answer: degradedError},
	{scope: onAppend, is: []error{engine.ErrReadOnly}, code: CodeForbidden, msg: "this home is open read-only: writes are refused",
		fix: "Run mutations against the live home's daemon, not a replayed one."},
	{scope: onAppend, is: []error{engine.ErrFeedbackBusy}, code: CodeBusy, msg: "feedback.jsonl ends in another program's unfinished line",
		fix: "Retry with the same request id once the other writer finished its line."},
	{scope: onTerminal, is: []error{pty.ErrSpoolUnavailable}, code: CodeDegraded,
		fix: "The spool file lags the log (every byte is in the log): the views catch up by themselves; if this persists, see 'cmlab status' and run 'cmlab rebuild'."},
	{scope: onTerminal, is: []error{wal.ErrClosed, pty.ErrClosed}, code: CodeDegraded,
		fix: "The daemon is shutting down; retry against the next one."},
	{scope: onSteps | onAppend, is: []error{wal.ErrClosed}, code: CodeDegraded, msg: "the daemon is shutting down",
		fix: "Retry with the same request id once the daemon is back."},
	{scope: onTerminal, is: []error{context.DeadlineExceeded, context.Canceled}, code: CodeBusy, msg: "the request was cancelled: %s",
		fix: "Retry with the same request id."},
	// Transient: nothing was changed, retry after Retry-After.
	{scope: onAny, is: []error{syscall.EMFILE, syscall.ENFILE}, answer: unavailableFDs},
	{scope: onAny, is: []error{engine.ErrViewsBehind}, code: CodeUnavailable,
		fix: "Retry shortly with the same request id: the views are being brought up to the log, which holds every acknowledged write. Nothing was changed by this request."},
}

// mapError is err as the routes of scope answer it (errTable): an
// *APIError, or err itself when no row of scope names it (nil stays nil).
func mapError(scope errScope, err error) error {
	if err == nil {
		return nil
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	for _, r := range errTable {
		if r.scope&scope == 0 || !slices.ContainsFunc(r.is, func(e error) bool { return errors.Is(err, e) }) {
			continue
		}
		if r.answer != nil {
			return r.answer(err)
		}
		msg := err.Error()
		if r.msg != "" {
			msg = r.msg
			if strings.Contains(msg, "%s") {
				msg = fmt.Sprintf(msg, err.Error())
			}
		}
		return NewError(r.code, msg, r.fix)
	}
	return err
}

// asAPIError turns any error into an APIError (errTable's rows for every
// answer); unknown errors are INTERNAL.
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(mapError(onAny, err), &ae) {
		return ae
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

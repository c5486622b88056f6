package labapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
)

// TestErrTable: the one error table answers each sentinel (wrapped, as
// the packages below return them) with its code, HTTP status and message
// for the routes of its scope, and passes it on unchanged elsewhere; every
// row's code has a status.
func TestErrTable(t *testing.T) {
	for i, r := range errTable {
		if r.answer == nil {
			if _, ok := statusOf[r.code]; !ok {
				t.Errorf("row %d: code %q has no HTTP status", i, r.code)
			}
		}
	}
	wrap := func(e error) error { return fmt.Errorf("op: %w", e) }
	for _, tc := range []struct {
		scope  errScope
		err    error
		code   string
		status int
		msg    string // "" the error's text
	}{
		{onTerminal, pty.ErrInvalidCursor, CodeInvalidCursor, http.StatusBadRequest, ""},
		{onTerminal, pty.ErrTooManyShells, CodeBusy, http.StatusConflict, ""},
		{onTerminal, wal.ErrClosed, CodeDegraded, http.StatusServiceUnavailable, ""},
		{onTerminal, context.Canceled, CodeBusy, http.StatusConflict, "the request was cancelled: op: context canceled"},
		{onSteps, wal.ErrClosed, CodeDegraded, http.StatusServiceUnavailable, "the daemon is shutting down"},
		{onSteps, steps.ErrUnknownStep, CodeNotFound, http.StatusNotFound, ""},
		{onApprove | onSteps, steps.ErrInFlight, CodeBusy, http.StatusConflict, ""},
		{onApprove | onSteps, steps.ErrInvalidTransition, CodeInvalidArgument, http.StatusBadRequest, ""},
		{onApprove | onSteps, recovery.ErrNoWorld, CodeInvalidArgument, http.StatusBadRequest, "op: " + recovery.ErrNoWorld.Error() + ": there is no world to hash"},
		{onAppend, engine.ErrReadOnly, CodeForbidden, http.StatusForbidden, "this home is open read-only: writes are refused"},
		{onAppend, engine.ErrFeedbackBusy, CodeBusy, http.StatusConflict, "feedback.jsonl ends in another program's unfinished line"},
		{onAppend | onSteps | onTerminal, wal.ErrFailed, CodeDegraded, http.StatusServiceUnavailable, "the log cannot make writes durable: op: wal: log failed"},
		{onAny, syscall.EMFILE, CodeUnavailable, http.StatusServiceUnavailable, "out of file descriptors: op: too many open files"},
		{onAny, engine.ErrViewsBehind, CodeUnavailable, http.StatusServiceUnavailable, ""},
	} {
		err := wrap(tc.err)
		var ae *APIError
		if !errors.As(mapError(tc.scope, err), &ae) {
			t.Errorf("%v in scope %b: not mapped", tc.err, tc.scope)
			continue
		}
		want := tc.msg
		if want == "" {
			want = err.Error()
		}
		if ae.Code != tc.code || ae.Status() != tc.status || ae.Message != want || ae.Fix() == "" {
			t.Errorf("%v in scope %b: %s %d %q (fix %q), want %s %d %q", tc.err, tc.scope, ae.Code, ae.Status(), ae.Message, ae.Fix(), tc.code, tc.status, want)
		}
	}
	// Out of scope: unchanged, and INTERNAL at the end.
	if err := wrap(pty.ErrNotFound); mapError(onSteps, err) != err || asAPIError(err).Code != CodeInternal {
		t.Errorf("a terminal error mapped by the step routes")
	}
	if mapError(onTerminal, nil) != nil {
		t.Error("nil mapped")
	}
}

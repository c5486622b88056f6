package labapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// registerPtyRoutes registers the terminal bridge of SPEC §6 (seed 001):
// JSON in, JSON out, the seed's field names. Every route needs the token,
// GET included. wait_for, wait_prompt and read_spool are POSTs that only
// read: they are served while the log is degraded. exec_block,
// exec_interactive, send and expect_send honour request ids: the event that
// records the act carries the response snapshot, so a retry returns it and
// nothing is run or typed again. end_session and reset honour them too,
// recorded once they have acted (recordPtyRequest).
func (s *Server) registerPtyRoutes() {
	const p = "/api/pty/{conversationId}/"
	s.route("POST "+p+"exec_block", authAlways, ptyActRoute(s, "pty.exec_block", s.ptyExec(false)))
	s.route("POST "+p+"exec_interactive", authAlways, ptyActRoute(s, "pty.exec_interactive", s.ptyExec(true)))
	s.route("POST "+p+"send", authAlways, ptyActRoute(s, "pty.send", ptySend))
	s.route("POST "+p+"wait_for", authAlwaysRead, ptyReadRoute(s, ptyWaitFor))
	s.route("POST "+p+"wait_prompt", authAlwaysRead, ptyReadRoute(s, ptyWaitPrompt))
	s.route("POST "+p+"expect_send", authAlways, ptyActRoute(s, "pty.expect_send", ptyExpectSend))
	s.route("POST "+p+"read_spool", authAlwaysRead, ptyReadRoute(s, ptyReadSpool))
	s.route("POST "+p+"interrupt", authAlways, ptyActRoute(s, "pty.interrupt", s.ptyInterrupt))
	s.route("POST "+p+"end_session", authAlways, ptyActRoute(s, "pty.end_session", s.ptyEndSession))
	s.route("POST "+p+"reset", authAlways, ptyActRoute(s, "pty.reset", s.ptyReset))
	s.route("POST "+p+"exec_wait", authAlways, s.handlePtyExecWait) // pty_run.go
	s.route("GET "+p+"status", authAlways, ptyRoute(s, ptyStatus))
	s.route("GET "+p+"blocks", authAlways, ptyRoute(s, ptyBlocks))
	s.route("GET "+p+"blocks/{blockId}", authAlways, ptyRoute(s, ptyBlock))
	s.route("GET "+p+"blocks/{blockId}/output", authAlways, ptyRoute(s, ptyBlockOutput))
	s.route("GET "+p+"search", authAlways, ptyRoute(s, ptySearch))
	s.route("GET /api/pty", authAlways, ptyRoute(s, ptySlots))
}

// ptyBusy is the seed's refusal body ({ok:false, error:"busy"}), sent with
// HTTP 409.
type ptyBusy struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

// conflictWriter turns the 200 that s.idempotent writes for a refusal body
// into 409.
type conflictWriter struct {
	http.ResponseWriter
	conflict bool
}

func (w *conflictWriter) WriteHeader(code int) {
	if w.conflict && code == http.StatusOK {
		code = http.StatusConflict
	}
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) ptyManager() (*pty.Manager, error) {
	if s.opts.Pty == nil {
		return nil, NewError(CodeNotFound, "the terminal is not available on this server", "Start the daemon with 'cmlab serve' and use its API.")
	}
	if s.opts.ReadOnly {
		return nil, NewError(CodeForbidden, "this daemon is read-only", "")
	}
	return s.opts.Pty, nil
}

// refusal turns busy / interactive-mode errors into the seed's body.
func refusal(w *conflictWriter, err error) (any, bool) {
	switch {
	case errors.Is(err, pty.ErrInteractive):
		w.conflict = true
		return ptyBusy{OK: false, Error: "interactive mode", Message: err.Error()}, true
	case errors.Is(err, pty.ErrBusy):
		w.conflict = true
		return ptyBusy{OK: false, Error: "busy", Message: err.Error()}, true
	}
	return nil, false
}

// ptyRoute serves a terminal route that only reads: answer what op
// returns for the path's conversation, its errors mapped by ptyError (which
// passes an *APIError through).
func ptyRoute(s *Server, op func(r *http.Request, m *pty.Manager, conv string) (any, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		m, err := s.ptyManager()
		if err != nil {
			return err
		}
		res, err := op(r, m, r.PathValue("conversationId"))
		if err != nil {
			return mapError(onTerminal, err)
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	}
}

// ptyReadRoute serves a terminal POST that only reads (a wait or a spool
// read): decode the body into an In and answer what op returns.
func ptyReadRoute[In any](s *Server, op func(ctx context.Context, m *pty.Manager, conv string, in In) (any, error)) handlerFunc {
	return ptyRoute(s, func(r *http.Request, m *pty.Manager, conv string) (any, error) {
		body, err := readBody(r)
		if err != nil {
			return nil, err
		}
		var in In
		if err := decodeJSON(body, &in); err != nil {
			return nil, err
		}
		return op(r.Context(), m, conv, in)
	})
}

// ptyActRoute serves a terminal POST that acts, at most once per request
// id: op decodes nothing itself, validates in and acts, recording req with
// the event that records the act. The conversation is part of the route
// hashed with the body: one id reused on another conversation is
// IDEMPOTENCY_KEY_REUSED, not a replay. A busy or interactive-mode refusal
// is answered with the seed's body and HTTP 409.
func ptyActRoute[In any](s *Server, route string, op func(ctx context.Context, m *pty.Manager, conv string, in In, req pty.Request) (any, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		m, err := s.ptyManager()
		if err != nil {
			return err
		}
		conv := r.PathValue("conversationId")
		sw := &conflictWriter{ResponseWriter: w}
		return decodeIdempotent(s, sw, r, route+" "+conv, func(in *In, req, hash string) (any, error) {
			res, err := op(r.Context(), m, conv, *in, pty.Request{ID: req, Hash: hash})
			if b, ok := refusal(sw, err); ok {
				return b, nil
			}
			if err != nil {
				return nil, mapError(onTerminal, err)
			}
			return res, nil
		})
	}
}

type ptyExecReq struct {
	Cmd *string `json:"cmd"`
	Cwd string  `json:"cwd"`
}

func (s *Server) ptyExec(interactive bool) func(ctx context.Context, m *pty.Manager, conv string, in ptyExecReq, req pty.Request) (any, error) {
	return func(ctx context.Context, m *pty.Manager, conv string, in ptyExecReq, req pty.Request) (any, error) {
		if in.Cmd == nil {
			return nil, NewError(CodeInvalidArgument, "cmd is required", "Send {\"cmd\": \"…\", \"cwd\"?: \"…\"}.")
		}
		if interactive {
			return m.ExecInteractive(ctx, conv, *in.Cmd, in.Cwd, req)
		}
		return m.ExecBlock(ctx, conv, *in.Cmd, in.Cwd, req)
	}
}

type ptySendReq struct {
	Data *string `json:"data"`
}

func ptySend(ctx context.Context, m *pty.Manager, conv string, in ptySendReq, req pty.Request) (any, error) {
	if in.Data == nil {
		return nil, NewError(CodeInvalidArgument, "data is required", "Send {\"data\": \"7\\r\"}.")
	}
	return m.Send(ctx, conv, []byte(*in.Data), req)
}

// fromCursor is an optional from_cursor of a wait: omitted, the wait
// scans from the end of the spool when the request arrives (pty.FromEnd),
// so it never matches output that was there before.
func fromCursor(c *int64) int64 {
	switch {
	case c == nil:
		return pty.FromEnd
	case *c == pty.FromEnd:
		return -1 // not a wire value: INVALID_CURSOR like any negative cursor
	}
	return *c
}

type ptyWaitForReq struct {
	Match      string `json:"match"`
	MatchType  string `json:"match_type"`
	FromCursor *int64 `json:"from_cursor"`
	TimeoutMs  int64  `json:"timeout_ms"`
	Raw        bool   `json:"raw"`
}

func ptyWaitFor(ctx context.Context, m *pty.Manager, conv string, in ptyWaitForReq) (any, error) {
	return m.WaitFor(ctx, conv, pty.WaitParams{Match: in.Match, MatchType: in.MatchType, FromCursor: fromCursor(in.FromCursor), TimeoutMs: in.TimeoutMs, Raw: in.Raw})
}

type ptyWaitPromptReq struct {
	FromCursor *int64 `json:"from_cursor"`
	TimeoutMs  int64  `json:"timeout_ms"`
	Raw        bool   `json:"raw"`
}

func ptyWaitPrompt(ctx context.Context, m *pty.Manager, conv string, in ptyWaitPromptReq) (any, error) {
	return m.WaitPromptView(ctx, conv, fromCursor(in.FromCursor), in.TimeoutMs, in.Raw)
}

type ptyExpectSendReq struct {
	Expect     string  `json:"expect"`
	MatchType  string  `json:"match_type"`
	Send       *string `json:"send"`
	FromCursor *int64  `json:"from_cursor"`
	TimeoutMs  int64   `json:"timeout_ms"`
	Raw        bool    `json:"raw"`
}

func ptyExpectSend(ctx context.Context, m *pty.Manager, conv string, in ptyExpectSendReq, req pty.Request) (any, error) {
	if in.Send == nil {
		return nil, NewError(CodeInvalidArgument, "send is required", "Send {\"expect\": \"…\", \"send\": \"…\", \"from_cursor\": N, \"timeout_ms\": N}.")
	}
	wp := pty.WaitParams{Match: in.Expect, MatchType: in.MatchType, FromCursor: fromCursor(in.FromCursor), TimeoutMs: in.TimeoutMs, Raw: in.Raw}
	return m.ExpectSend(ctx, conv, wp, []byte(*in.Send), req)
}

type ptyReadReq struct {
	FromCursor int64 `json:"from_cursor"`
	MaxBytes   int64 `json:"max_bytes"`
	Raw        bool  `json:"raw"`
}

func ptyReadSpool(ctx context.Context, m *pty.Manager, conv string, in ptyReadReq) (any, error) {
	return m.ReadSpoolView(ctx, conv, in.FromCursor, in.MaxBytes, in.Raw)
}

type ptyInterruptReq struct{}

func (s *Server) ptyInterrupt(ctx context.Context, m *pty.Manager, conv string, in ptyInterruptReq, req pty.Request) (any, error) {
	res, err := m.Interrupt(ctx, conv, req)
	if err != nil {
		return nil, err
	}
	if !res.Interrupted {
		// Nothing was typed, so nothing recorded the id: record it now so a
		// retry cannot interrupt a block begun since.
		return res, s.recordPtyRequest(ctx, conv, "pty.interrupt", req, res)
	}
	return res, nil
}

type ptyEndReq struct {
	GraceMs int64 `json:"grace_ms"`
}

func (s *Server) ptyEndSession(ctx context.Context, m *pty.Manager, conv string, in ptyEndReq, req pty.Request) (any, error) {
	res, err := m.EndSession(ctx, conv, time.Duration(in.GraceMs)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	return res, s.recordPtyRequest(ctx, conv, "pty.end_session", req, res)
}

type ptyResetReq struct {
	Reason string `json:"reason"`
}

func (s *Server) ptyReset(ctx context.Context, m *pty.Manager, conv string, in ptyResetReq, req pty.Request) (any, error) {
	res, err := m.Reset(ctx, conv, in.Reason)
	if err != nil {
		return nil, err
	}
	return res, s.recordPtyRequest(ctx, conv, "pty.reset", req, res)
}

// recordPtyRequest records the request id of an end_session or reset once
// it has acted, so a retry gets the same answer and interrupts or replaces
// no later shell. Unlike exec and send, these act in several steps (an
// interrupt, a wait, maybe a kill and a new shell), so the record follows
// the act: a crash between the two leaves the request unrecorded and a
// retry acts again — on a session that is already ended or fresh.
func (s *Server) recordPtyRequest(ctx context.Context, conv, kind string, req pty.Request, res any) error {
	if req.ID == "" {
		return nil
	}
	return s.appendAnswer(ctx, conv, &events.IdempotencyRecorded{Kind: kind, EntityID: conv}, req.ID, req.Hash, res)
}

func ptyStatus(r *http.Request, m *pty.Manager, conv string) (any, error) {
	return m.Status(r.Context(), conv)
}

// ptyQuery reads a terminal route's optional query parameters: err is
// the first one that does not parse, and every read after it is zero.
type ptyQuery struct {
	v   url.Values
	err error
}

func newPtyQuery(r *http.Request) *ptyQuery { return &ptyQuery{v: r.URL.Query()} }

// int is a non-negative integer parameter, 0 when absent.
func (q *ptyQuery) int(name string) int64 {
	v := q.v.Get(name)
	if v == "" || q.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		q.err = NewError(CodeInvalidArgument, name+" must be a non-negative integer", "")
		return 0
	}
	return n
}

// bool is a boolean parameter, false when absent.
func (q *ptyQuery) bool(name string) bool {
	v := q.v.Get(name)
	if v == "" || q.err != nil {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		q.err = NewError(CodeInvalidArgument, name+" must be true or false", "")
	}
	return b
}

func ptyBlocks(r *http.Request, m *pty.Manager, conv string) (any, error) {
	q := newPtyQuery(r)
	since, limit := q.int("since"), q.int("limit")
	if q.err != nil {
		return nil, q.err
	}
	return m.BlocksSince(r.Context(), conv, int(since), int(limit))
}

func ptyBlock(r *http.Request, m *pty.Manager, conv string) (any, error) {
	return m.Block(r.Context(), conv, r.PathValue("blockId"))
}

func ptyBlockOutput(r *http.Request, m *pty.Manager, conv string) (any, error) {
	q := newPtyQuery(r)
	// wait_ms: an open block with nothing past offset yet is waited on
	// (for more output or its END), so a client streams without polling.
	off, max, wait, raw := q.int("offset"), q.int("max_bytes"), q.int("wait_ms"), q.bool("raw")
	if q.err != nil {
		return nil, q.err
	}
	return m.FollowBlockOutputView(r.Context(), conv, r.PathValue("blockId"), off, max, time.Duration(wait)*time.Millisecond, raw)
}

// ptySlots lists the running shells (GET /api/pty); the path has no
// conversation.
func ptySlots(r *http.Request, m *pty.Manager, _ string) (any, error) {
	return m.Slots(r.Context()), nil
}

func ptySearch(r *http.Request, m *pty.Manager, conv string) (any, error) {
	q := r.URL.Query()
	return m.Search(r.Context(), conv, q.Get("q"), q.Get("block_id"))
}

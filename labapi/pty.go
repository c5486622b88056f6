package labapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/wal"
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
	s.route("POST "+p+"exec_block", authAlways, s.ptyExecBlock)
	s.route("POST "+p+"exec_interactive", authAlways, s.ptyExecInteractive)
	s.route("POST "+p+"send", authAlways, s.ptySend)
	s.route("POST "+p+"wait_for", authAlwaysRead, s.ptyWaitFor)
	s.route("POST "+p+"wait_prompt", authAlwaysRead, s.ptyWaitPrompt)
	s.route("POST "+p+"expect_send", authAlways, s.ptyExpectSend)
	s.route("POST "+p+"read_spool", authAlwaysRead, s.ptyReadSpool)
	s.route("POST "+p+"end_session", authAlways, s.ptyEndSession)
	s.route("POST "+p+"reset", authAlways, s.ptyReset)
	s.route("GET "+p+"status", authAlways, s.ptyStatus)
	s.route("GET "+p+"blocks", authAlways, s.ptyBlocks)
	s.route("GET "+p+"blocks/{blockId}", authAlways, s.ptyBlock)
	s.route("GET "+p+"blocks/{blockId}/output", authAlways, s.ptyBlockOutput)
	s.route("GET "+p+"search", authAlways, s.ptySearch)
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

// ptyError maps terminal errors to the envelope.
func ptyError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pty.ErrInvalidCursor):
		return NewError(CodeInvalidCursor, err.Error(), "Use the resume_cursor of your last wait_for or read_spool, or status.resume_cursor.")
	case errors.Is(err, pty.ErrInvalidArgument):
		return NewError(CodeInvalidArgument, err.Error(), "Fix the request field named in the message.")
	case errors.Is(err, pty.ErrNotFound):
		return NewError(CodeNotFound, err.Error(), "List the blocks with GET /api/pty/{conversationId}/blocks.")
	case errors.Is(err, pty.ErrTooManyShells):
		return NewError(CodeBusy, err.Error(), "Reset a conversation you no longer use (POST /api/pty/{conversationId}/reset ends its shell), or raise the limit.")
	case errors.Is(err, wal.ErrFailed):
		return degradedError(err)
	case errors.Is(err, wal.ErrClosed), errors.Is(err, pty.ErrClosed):
		return NewError(CodeDegraded, err.Error(), "The daemon is shutting down; retry against the next one.")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return NewError(CodeBusy, "the request was cancelled: "+err.Error(), "Retry with the same request id.")
	}
	return err
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

type ptyExecReq struct {
	Cmd *string `json:"cmd"`
	Cwd string  `json:"cwd"`
}

func (s *Server) ptyExec(w http.ResponseWriter, r *http.Request, route string, interactive bool) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	conv := r.PathValue("conversationId")
	sw := &conflictWriter{ResponseWriter: w}
	// The conversation is part of the request: one id reused on another
	// conversation is IDEMPOTENCY_KEY_REUSED, not a replay.
	return s.idempotent(sw, r, route+" "+conv, body, func(req, hash string) (any, error) {
		var in ptyExecReq
		if err := decodeJSON(body, &in); err != nil {
			return nil, err
		}
		if in.Cmd == nil {
			return nil, NewError(CodeInvalidArgument, "cmd is required", "Send {\"cmd\": \"…\", \"cwd\"?: \"…\"}.")
		}
		var resp any
		var err error
		if interactive {
			resp, err = m.ExecInteractive(r.Context(), conv, *in.Cmd, in.Cwd, pty.Request{ID: req, Hash: hash})
		} else {
			resp, err = m.ExecBlock(r.Context(), conv, *in.Cmd, in.Cwd, pty.Request{ID: req, Hash: hash})
		}
		if b, ok := refusal(sw, err); ok {
			return b, nil
		}
		return resp, ptyError(err)
	})
}

func (s *Server) ptyExecBlock(w http.ResponseWriter, r *http.Request) error {
	return s.ptyExec(w, r, "pty.exec_block", false)
}

func (s *Server) ptyExecInteractive(w http.ResponseWriter, r *http.Request) error {
	return s.ptyExec(w, r, "pty.exec_interactive", true)
}

type ptySendReq struct {
	Data *string `json:"data"`
}

func (s *Server) ptySend(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	conv := r.PathValue("conversationId")
	return s.idempotent(w, r, "pty.send "+conv, body, func(req, hash string) (any, error) {
		var in ptySendReq
		if err := decodeJSON(body, &in); err != nil {
			return nil, err
		}
		if in.Data == nil {
			return nil, NewError(CodeInvalidArgument, "data is required", "Send {\"data\": \"7\\r\"}.")
		}
		res, err := m.Send(r.Context(), conv, []byte(*in.Data), pty.Request{ID: req, Hash: hash})
		return res, ptyError(err)
	})
}

func (s *Server) ptyWaitFor(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var in pty.WaitParams
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	res, err := m.WaitFor(r.Context(), r.PathValue("conversationId"), in)
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

type ptyWaitPromptReq struct {
	FromCursor int64 `json:"from_cursor"`
	TimeoutMs  int64 `json:"timeout_ms"`
}

func (s *Server) ptyWaitPrompt(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var in ptyWaitPromptReq
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	res, err := m.WaitPrompt(r.Context(), r.PathValue("conversationId"), in.FromCursor, in.TimeoutMs)
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

type ptyExpectSendReq struct {
	Expect     string  `json:"expect"`
	MatchType  string  `json:"match_type"`
	Send       *string `json:"send"`
	FromCursor int64   `json:"from_cursor"`
	TimeoutMs  int64   `json:"timeout_ms"`
}

func (s *Server) ptyExpectSend(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	conv := r.PathValue("conversationId")
	return s.idempotent(w, r, "pty.expect_send "+conv, body, func(req, hash string) (any, error) {
		var in ptyExpectSendReq
		if err := decodeJSON(body, &in); err != nil {
			return nil, err
		}
		if in.Send == nil {
			return nil, NewError(CodeInvalidArgument, "send is required", "Send {\"expect\": \"…\", \"send\": \"…\", \"from_cursor\": N, \"timeout_ms\": N}.")
		}
		wp := pty.WaitParams{Match: in.Expect, MatchType: in.MatchType, FromCursor: in.FromCursor, TimeoutMs: in.TimeoutMs}
		res, err := m.ExpectSend(r.Context(), conv, wp, []byte(*in.Send), pty.Request{ID: req, Hash: hash})
		return res, ptyError(err)
	})
}

type ptyReadReq struct {
	FromCursor int64 `json:"from_cursor"`
	MaxBytes   int64 `json:"max_bytes"`
}

func (s *Server) ptyReadSpool(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var in ptyReadReq
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	res, err := m.ReadSpool(r.Context(), r.PathValue("conversationId"), in.FromCursor, in.MaxBytes)
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

type ptyEndReq struct {
	GraceMs int64 `json:"grace_ms"`
}

func (s *Server) ptyEndSession(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	conv := r.PathValue("conversationId")
	return s.idempotent(w, r, "pty.end_session "+conv, body, func(req, hash string) (any, error) {
		var in ptyEndReq
		if err := decodeJSON(body, &in); err != nil {
			return nil, err
		}
		res, err := m.EndSession(r.Context(), conv, time.Duration(in.GraceMs)*time.Millisecond)
		if err != nil {
			return nil, ptyError(err)
		}
		return res, s.recordPtyRequest(r.Context(), conv, "pty.end_session", req, hash, res)
	})
}

type ptyResetReq struct {
	Reason string `json:"reason"`
}

func (s *Server) ptyReset(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	conv := r.PathValue("conversationId")
	return s.idempotent(w, r, "pty.reset "+conv, body, func(req, hash string) (any, error) {
		var in ptyResetReq
		if err := decodeJSON(body, &in); err != nil {
			return nil, err
		}
		res, err := m.Reset(r.Context(), conv, in.Reason)
		if err != nil {
			return nil, ptyError(err)
		}
		return res, s.recordPtyRequest(r.Context(), conv, "pty.reset", req, hash, res)
	})
}

// recordPtyRequest records the request id of an end_session or reset once
// it has acted, so a retry gets the same answer and interrupts or replaces
// no later shell. Unlike exec and send, these act in several steps (an
// interrupt, a wait, maybe a kill and a new shell), so the record follows
// the act: a crash between the two leaves the request unrecorded and a
// retry acts again — on a session that is already ended or fresh.
func (s *Server) recordPtyRequest(ctx context.Context, conv, kind, req, hash string, res any) error {
	if req == "" {
		return nil
	}
	snap, err := json.Marshal(res)
	if err != nil {
		return err
	}
	ev, err := events.New(conv, &events.IdempotencyRecorded{Kind: kind, EntityID: conv})
	if err != nil {
		return err
	}
	_, err = s.appendEvent(ctx, ev.WithRequest(req, hash, snap))
	return err
}

func (s *Server) ptyStatus(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	res, err := m.Status(r.Context(), r.PathValue("conversationId"))
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// queryInt parses an optional integer query parameter.
func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, NewError(CodeInvalidArgument, name+" must be a non-negative integer", "")
	}
	return n, nil
}

func (s *Server) ptyBlocks(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	since, err := queryInt(r, "since")
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	res, err := m.BlocksSince(r.Context(), r.PathValue("conversationId"), int(since), int(limit))
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) ptyBlock(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	res, err := m.Block(r.Context(), r.PathValue("conversationId"), r.PathValue("blockId"))
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) ptyBlockOutput(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	off, err := queryInt(r, "offset")
	if err != nil {
		return err
	}
	max, err := queryInt(r, "max_bytes")
	if err != nil {
		return err
	}
	res, err := m.BlockOutput(r.Context(), r.PathValue("conversationId"), r.PathValue("blockId"), off, max)
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) ptySearch(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	res, err := m.Search(r.Context(), r.PathValue("conversationId"), q.Get("q"), q.Get("block_id"))
	if err != nil {
		return ptyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

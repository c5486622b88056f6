package labapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/cmlab/cmlab/pty"
)

type ptyExecWaitReq struct {
	Cmd       *string `json:"cmd"`
	Cwd       string  `json:"cwd"`
	TimeoutMs int64   `json:"timeout_ms"`
	MaxBytes  int64   `json:"max_bytes"`
	Raw       bool    `json:"raw"`
}

// handlePtyExecWait serves exec_wait (issue 25): run a command as a block
// and answer when it ended — its status, exit code, clean output (bounded,
// with the offset to read more) and the cursor after it — so a client
// never has to infer "done" from a wait of its own.
//
// It starts the block at most once per request id (the block's BEGIN
// records the exec_block answer), then waits for it: a retry with the same
// id waits for the same block and runs nothing.
func (s *Server) handlePtyExecWait(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	conv := r.PathValue("conversationId")
	body, err := readBody(r)
	if err != nil {
		return err
	}
	cw := &captureWriter{header: http.Header{}}
	err = s.idempotent(cw, r, "pty.exec_wait "+conv, body, func(req, hash string) (any, error) {
		var in ptyExecWaitReq
		if err := decodeJSON(body, &in); err != nil {
			return nil, err
		}
		if in.Cmd == nil {
			return nil, NewError(CodeInvalidArgument, "cmd is required", "Send {\"cmd\": \"…\", \"cwd\"?: \"…\", \"timeout_ms\"?: N, \"max_bytes\"?: N}.")
		}
		res, err := m.ExecBlock(r.Context(), conv, *in.Cmd, in.Cwd, pty.Request{ID: req, Hash: hash})
		if err != nil {
			return nil, err
		}
		return res, nil
	})
	if err != nil {
		cf := &conflictWriter{ResponseWriter: w}
		if b, ok := refusal(cf, err); ok {
			writeJSON(cf, http.StatusOK, b)
			return nil
		}
		return mapError(onTerminal, err)
	}
	var started pty.ExecResult
	if cw.status != http.StatusOK || json.Unmarshal(cw.body, &started) != nil || started.BlockID == "" {
		return NewError(CodeInternal, "exec_wait: the block's start answered "+strconv.Itoa(cw.status), "Check the daemon log.")
	}
	var in ptyExecWaitReq
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	if cw.header.Get("X-CM-LAB-IDEMPOTENT-REPLAY") != "" {
		w.Header().Set("X-CM-LAB-IDEMPOTENT-REPLAY", "true")
	}
	res, err := m.AwaitBlock(r.Context(), conv, started.BlockID, in.TimeoutMs, in.MaxBytes, in.Raw)
	if err != nil {
		return mapError(onTerminal, err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// captureWriter keeps an answer instead of sending it.
type captureWriter struct {
	header http.Header
	status int
	body   []byte
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body = append(c.body, b...)
	return len(b), nil
}

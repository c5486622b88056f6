package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLine is the longest JSON-RPC line accepted on stdio; a longer one is
// answered with an error and skipped.
const MaxLine = 16 << 20

// JSON-RPC error codes for lines the server cannot take.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// ServeStdio serves s on newline-delimited JSON-RPC over r and w until r
// ends or ctx is done.
//
// The SDK's stdio transport ends the session on the first line it cannot
// decode; an agent's stray line must not kill the terminal it drives. So
// every line is checked first: a valid JSON-RPC message goes to the SDK, any
// other line (not JSON, not a message, a batch, over MaxLine) is answered
// with a JSON-RPC error carrying its id when it has one, and skipped. Both
// writers share one lock, so answers never interleave inside a line.
//
// At the end of r the session ends once every request already read has
// been answered (a client may pipe a script and close its stdin); a request
// still running then is waited for until ctx ends. A read blocked on r when
// ctx ends cannot be interrupted (stdin has no deadline); it exits at the
// next line or at EOF, which for a stdio server is the parent closing the
// pipe.
func ServeStdio(ctx context.Context, s *sdk.Server, r io.Reader, w io.Writer) error {
	out := &lockedWriter{w: w}
	track := newInflight()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	runCtx, runEnded := context.WithCancel(ctx) // ends the drain wait if the session ends first
	defer runEnded()
	go func() {
		defer close(done)
		err := filterLines(r, pw, out, track)
		if err == nil {
			track.waitIdle(runCtx)
		}
		pw.CloseWithError(err) // nil → EOF for the SDK
	}()
	// The line guard enforces MaxLine; the SDK's own cap, which counts
	// bytes its decoder reads ahead, could end the session instead.
	err := s.Run(ctx, &sdk.IOTransport{Reader: pr, Writer: nopWriteCloser{&answerCounter{w: out, track: track}}, MaxLineLength: -1})
	runEnded()
	pr.Close() // unblocks the filter if it is writing
	if errors.Is(err, io.EOF) {
		err = nil
	}
	select {
	case <-done:
	default: // blocked reading r: it ends with the pipe
	}
	return err
}

// inflight is the set of the client's requests (by raw id) that have no
// answer yet. A request the client cancels leaves it too: the SDK need not
// answer it.
type inflight struct {
	mu      sync.Mutex
	pending map[string]bool
	changed chan struct{} // signalled (non-blocking) when a request leaves
}

func newInflight() *inflight {
	return &inflight{pending: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (f *inflight) add(id json.RawMessage) {
	f.mu.Lock()
	f.pending[string(id)] = true
	f.mu.Unlock()
}

func (f *inflight) done(id json.RawMessage) {
	f.mu.Lock()
	delete(f.pending, string(id))
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// waitIdle returns when no request is pending or ctx ends.
func (f *inflight) waitIdle(ctx context.Context) {
	for {
		f.mu.Lock()
		n := len(f.pending)
		f.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-f.changed:
		case <-ctx.Done():
			return
		}
	}
}

// answerCounter passes the SDK's messages through and counts its answers
// (a message with an id and no method) against the pending requests.
type answerCounter struct {
	w     io.Writer
	track *inflight
}

func (a *answerCounter) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	if json.Unmarshal(p, &probe) == nil && probe.Method == nil && len(probe.ID) > 0 && string(probe.ID) != "null" {
		a.track.done(probe.ID)
	}
	return n, err
}

// lockedWriter serialises whole-message writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// filterLines copies valid JSON-RPC lines from r to dst and answers the
// others on out; track learns each request passed on and each request the
// client cancels. It returns nil at the end of r.
func filterLines(r io.Reader, dst io.Writer, out io.Writer, track *inflight) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !tooLong {
				line = append(line, chunk...)
				if len(line) > MaxLine {
					tooLong, line = true, nil
				}
			}
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return err
		}
		if !tooLong {
			line = append(line, chunk...)
			tooLong = len(line) > MaxLine
		}
		if tooLong {
			writeRPCError(out, nil, codeInvalidRequest, "message is longer than the 16 MiB limit; it was skipped")
		} else if msg := bytes.TrimSpace(line); len(msg) > 0 {
			if code, text, id, reqID, cancelled := checkMessage(msg); code != 0 {
				writeRPCError(out, id, code, text)
			} else {
				if reqID != nil {
					track.add(reqID)
				}
				if cancelled != nil {
					track.done(cancelled)
				}
				if _, werr := dst.Write(append(msg, '\n')); werr != nil {
					return nil // the session is over
				}
			}
		}
		line, tooLong = line[:0], false
		if err != nil { // io.EOF
			return nil
		}
	}
}

// checkMessage returns 0 for a line the SDK can take, else the JSON-RPC
// error code and text, and the request's id when it can be read. For a line
// it takes, reqID is the id of a request that will be answered, cancelled
// the id named by a notifications/cancelled.
func checkMessage(msg []byte) (code int, text string, id, reqID, cancelled json.RawMessage) {
	if !json.Valid(msg) {
		return codeParseError, "parse error: the line is not JSON; send one JSON-RPC message per line", nil, nil, nil
	}
	if msg[0] == '[' {
		return codeInvalidRequest, "JSON-RPC batches are not supported; send one message per line", nil, nil, nil
	}
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(msg, &probe); err != nil {
		return codeInvalidRequest, "invalid request: not a JSON-RPC object", nil, nil, nil
	}
	if len(probe.ID) > 0 && probe.ID[0] != '"' && probe.ID[0] != '-' && (probe.ID[0] < '0' || probe.ID[0] > '9') {
		probe.ID = nil // only strings and numbers are ids
	}
	if _, err := jsonrpc.DecodeMessage(msg); err != nil {
		return codeInvalidRequest, "invalid request: " + err.Error(), probe.ID, nil, nil
	}
	if probe.Method == nil && probe.Result == nil && probe.Error == nil {
		return codeInvalidRequest, "invalid request: no method (and not a response)", probe.ID, nil, nil
	}
	if probe.Method == nil {
		return 0, "", nil, nil, nil
	}
	if len(probe.ID) > 0 {
		return 0, "", nil, probe.ID, nil
	}
	var note struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &note) == nil && note.Method == "notifications/cancelled" && len(note.Params.RequestID) > 0 {
		return 0, "", nil, nil, note.Params.RequestID
	}
	return 0, "", nil, nil, nil
}

func writeRPCError(out io.Writer, id json.RawMessage, code int, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	if err != nil {
		return
	}
	out.Write(append(b, '\n'))
}

// HTTPOptions configure HTTPHandler.
type HTTPOptions struct {
	Options
	// SessionTimeout closes MCP sessions idle this long; default 30 minutes.
	SessionTimeout time.Duration
}

// HTTPHandler serves the tools over streamable HTTP (one server, one MCP
// session per client). Authentication is the caller's job: labapi mounts
// it at /mcp behind the token check. Cancelling a call — the client's
// notifications/cancelled, or the request's connection going away — cancels
// the tool's HTTP request to the daemon.
func HTTPHandler(d *Daemon, opts HTTPOptions) http.Handler {
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	srv := NewServer(d, opts.Options)
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Logger:                       opts.Logger,
		SessionTimeout:               opts.SessionTimeout,
		PropagateRequestCancellation: true,
	})
}

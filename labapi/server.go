package labapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/console"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pagesec"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
)

// MaxBody is the largest request body accepted (1 MiB).
const MaxBody = 1 << 20

// Task focuses the Lab on one comparison or one review (GET /api/config).
type Task struct {
	Type         string `json:"type"` // "compare" | "review"
	ExperimentID string `json:"experimentId,omitempty"`
	RunID        string `json:"runId,omitempty"`
}

// Options configure a Server.
type Options struct {
	Engine *engine.Engine
	// Journal (required) is the step journal the steps routes record
	// through: the daemon's one (package daemon), shared with start-up
	// recovery and its auto-resume, so a transition's check and append
	// never interleave with another's. It must record on Engine.
	Journal *steps.Journal
	// Retention (required) is the retention/status read model
	// (retention.Open over Engine): the daemon's one, shared with its
	// compaction policy.
	Retention *retention.Model
	// Listen is the address the daemon listens on (for the Host check).
	Listen string
	// OperatorToken (state/token) opens every route: the terminal, steps,
	// recovery, the full event stream, /metrics and /mcp, and the Lab
	// routes. It is never served over HTTP. Empty: New draws a random one
	// (an in-process server, reached by no socket: Server.OperatorToken
	// gives it to the in-process caller).
	OperatorToken string
	// LabToken is what GET /api/config hands to the Lab's browser client;
	// it opens the Lab routes only (feedback, runs, experiments, export,
	// session, and the Lab part of the event stream). Empty: New draws a
	// random one for this server. It must differ from OperatorToken.
	LabToken string
	// SessionID is this daemon run's Lab session ("lab_<uuid>").
	SessionID string
	// AllowedRoots are the absolute directories imports may come from.
	AllowedRoots []string
	// UnknownPeerRoots are the roots for a caller whose uid the kernel
	// does not tell (peer.go): narrower than AllowedRoots by default
	// (RunDaemon). Nil: none, such a caller imports nothing.
	UnknownPeerRoots []string
	// ExportBudget bounds the bytes of lab/exports/ (export.go); 0 is
	// DefaultExportBudget.
	ExportBudget int64
	// LabStreams bounds the /api/events streams of Lab-token callers held
	// at once (events_budget.go); 0 is unbounded.
	LabStreams int
	// ReadOnly refuses every POST (a replayed home).
	ReadOnly bool
	// Pty is the terminal manager; nil disables the terminal routes.
	Pty     *pty.Manager
	Version string
	Logger  *slog.Logger
	// Task and ExitAfterSubmit are reported by /api/config; when
	// ExitAfterSubmit > 0, OnExit is called once that many submissions for
	// the task have been acknowledged.
	Task            *Task
	ExitAfterSubmit int
	OnExit          func()
	// UIDir, when set, is the Lab's browser client: index.html at / and
	// /index.html, every file under /lab/ (content-machine's layout). Point
	// it at content-machine's assets/lab to use its client unchanged.
	UIDir string
	// Page, when set and UIDir is not, is cmlab's own Lab (package labui):
	// served at / and /ui/…, with no token. The composition root hands it in.
	Page http.Handler
	// SSEHeartbeat is the comment interval on idle event streams (default 15s).
	SSEHeartbeat time.Duration
	// SSEWriteTimeout drops a client whose writes stall this long (default 10s).
	SSEWriteTimeout time.Duration
	// Console configures the operator console's login (code and idle
	// lifetimes); zero values take console's defaults.
	Console console.SessionOptions
	// DaemonLogFile is the daemon's log file (state/daemon.log), whose
	// recent WARN and ERROR lines the console's overview shows; empty:
	// none.
	DaemonLogFile string
}

// Server is the HTTP API over one engine.
type Server struct {
	opts     Options
	mux      *http.ServeMux
	log      *slog.Logger
	idem     *idempotency
	lab      *labStore
	metrics  *metrics
	terminal *terminalCounter // metrics_ops.go
	fbIndex  *feedbackIndex   // feedback_index.go

	importMu  sync.Mutex // imports: realpath lookup and append are one step
	submitMu  sync.Mutex // experiment create/submit: status check and append are one step
	startedAt time.Time
	submits   atomic.Int64
	exitOnce  sync.Once

	// routes lists every registered pattern with its auth, for the
	// tests that hold each route to its secret.
	routes []routeAuth

	exposureState // exposure.go: callers' groups, the export lock, the Lab streams held

	// errFn reports the engine's failed state; tests replace it.
	errFn func() error

	// console is the operator console's login state and read models of
	// this server (console.go): its sessions live and die with it.
	console consoleState

	// closing is done once Close is called: it ends the event streams,
	// the long polls, the MCP streams and the console's sampler.
	closing   context.Context
	closeAll  context.CancelFunc
	closeOnce sync.Once
	fbSignal  feedbackSignal // feedback_wait.go

	stageRec atomic.Pointer[StageRecorder] // stages.go; nil: nothing timed
}

// Close ends long-lived requests (event streams). It does not close the engine.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.closeAll()
		s.closeTravel() // the console's time-travel homes
	})
}

// authMode says what a route requires (SPEC §6, "Auth, two secrets").
type authMode int

const (
	authPostOnly authMode = iota // Lab routes: Lab or operator token on POST, reads open
	authAlways                   // terminal, steps, recovery, /metrics, /mcp: operator token on every method
	authNone                     // /api/config, /api/health, the UI's assets
	// authAlwaysRead: operator token on every method, and a POST that only
	// reads (the terminal's wait_for, wait_prompt, read_spool): served
	// while degraded.
	authAlwaysRead
	// authLabStream: /api/events: Lab or operator token on GET; the Lab
	// token sees the Lab's events only (labStreamTypes).
	authLabStream
)

// tokenKind is what a request's token opens.
type tokenKind int

const (
	tokenNone     tokenKind = iota // no token, or one that matches neither secret
	tokenLab                       // the Lab token of /api/config
	tokenOperator                  // state/token
	// tokenSession: no token, but a live console session cookie on a
	// route the console uses (consoleRoutes): the operator, for that route.
	tokenSession
)

// routeAuth is one registered pattern and what it requires.
type routeAuth struct {
	pattern string
	auth    authMode
}

// handlerFunc is a route body; a returned error is written as the envelope.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// New builds a server and registers every route. Its read models subscribe
// to the engine, so they are rebuilt from the whole log here.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("labapi: Options.Engine is required")
	}
	if opts.Journal == nil {
		return nil, errors.New("labapi: Options.Journal is required (the daemon's one step journal, steps.NewJournal)")
	}
	if opts.Journal.Engine() != opts.Engine {
		return nil, errors.New("labapi: Options.Journal records on another engine")
	}
	if opts.Retention == nil {
		return nil, errors.New("labapi: Options.Retention is required (the daemon's retention model, retention.Open)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SSEHeartbeat <= 0 {
		opts.SSEHeartbeat = 15 * time.Second
	}
	if opts.SSEWriteTimeout <= 0 {
		opts.SSEWriteTimeout = 10 * time.Second
	}
	if opts.OperatorToken == "" {
		opts.OperatorToken = newSecret()
	}
	if opts.LabToken == "" {
		opts.LabToken = newSecret()
	}
	if opts.LabToken == opts.OperatorToken {
		return nil, errors.New("labapi: the Lab token must differ from the operator token (the Lab token is served by /api/config)")
	}
	idx, err := opts.Engine.RequestIndex(context.Background())
	if err != nil {
		return nil, err
	}
	// On an empty log (a new home's first start) building the index
	// loses nothing: no warning.
	if why := idx.Rebuilt(); why != "" && opts.Engine.Log().LastSeq() > 0 {
		opts.Logger.Warn("request-id index rebuilt from the log", "file", opts.Engine.Home().Rel(opts.Engine.Home().RequestIndexFile()), "reason", why)
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), log: opts.Logger, idem: newIdempotency(idx),
		metrics: newMetrics(), startedAt: time.Now(), fbIndex: newFeedbackIndex(opts.Engine.Home().FeedbackFile())}
	s.closing, s.closeAll = context.WithCancel(context.Background())
	s.errFn = opts.Engine.Err
	if why := s.opts.Journal.SnapshotRefused(); why != "" {
		s.log.Warn("step state snapshot ignored, rebuilt from the log", "file", opts.Engine.Home().Rel(steps.SnapshotFile(opts.Engine.Home())), "reason", why)
	}
	if err := s.openLabState(); err != nil {
		return nil, err
	}
	s.terminal = watchTerminal(opts.Engine) // metrics_ops.go
	s.registerRoutes()
	return s, nil
}

// Start appends lab.session.started for this daemon run. serve calls it
// once; in-process clients and read-only servers do not.
func (s *Server) Start(ctx context.Context, pid int, listen string) error {
	ev, err := events.New(s.opts.SessionID, &events.LabSessionStarted{
		SessionID: s.opts.SessionID, Version: s.opts.Version, Pid: pid, Listen: listen})
	if err != nil {
		return err
	}
	_, err = s.opts.Engine.Append(ctx, ev)
	return err
}

// SessionID is this server's Lab session ("lab_<uuid>").
func (s *Server) SessionID() string { return s.opts.SessionID }

// Engine is the engine the server writes through.
func (s *Server) Engine() *engine.Engine { return s.opts.Engine }

// SetListen records the actual listen address (after binding port 0) for
// the Host check.
func (s *Server) SetListen(addr string) { s.opts.Listen = addr }

// Handler is the server's root handler: panic recovery, request log and
// metrics, the Host/Origin guard, then the mux.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !rw.wrote {
				writeError(rw, NewError(CodeInternal, "internal error", "Check the daemon log; retry with the same request id."))
			}
		}
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		status := rw.status
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.observeHTTP(route, status)
		// Checked first: the record's arguments cost allocations even when
		// the handler drops it.
		if level := requestLogLevel(route, status); s.log.Enabled(r.Context(), level) {
			s.log.Log(r.Context(), level, RequestLogMessage, "method", r.Method, "path", r.URL.Path, "route", route, "status", status,
				"bytes", rw.n, "dur_ms", time.Since(start).Milliseconds(), "req", r.Header.Get("X-CM-LAB-REQUEST-ID"))
		}
	}()
	if !s.hostAllowed(r.Host) {
		writeError(rw, NewError(CodeForbidden, "Host "+r.Host+" is not this daemon", "Connect to 127.0.0.1 or localhost (DNS-rebinding guard)."))
		return
	}
	if o, sent := r.Header["Origin"]; sent && (len(o) != 1 || !s.originAllowed(o[0], r.Host)) {
		writeError(rw, NewError(CodeForbidden, "cross-origin request refused: Origin must be exactly this daemon's http://host:port", "Use the Lab page served by this daemon."))
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		// No route: the mux answers 404 or 405 in plain text; give the envelope instead.
		probe := &statusProbe{}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			if allow := probe.h.Get("Allow"); allow != "" {
				rw.Header().Set("Allow", allow)
			}
			writeError(rw, NewError(CodeNotFound, "method "+r.Method+" is not allowed on "+r.URL.Path, "Use one of: "+probe.h.Get("Allow")+"."))
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			pagesec.NotFound(rw) // as content-machine answers every non-API miss
			return
		}
		writeError(rw, NewError(CodeNotFound, "no route "+r.Method+" "+r.URL.Path, "See SPEC §6 for the routes of cmlab serve."))
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// route registers pattern ("METHOD /path/{var}") with the given auth.
// Every method but GET and HEAD is a write: it is refused on a read-only
// server and, while the log is failed, answered 503 DEGRADED.
func (s *Server) route(pattern string, auth authMode, h handlerFunc) {
	s.routes = append(s.routes, routeAuth{pattern, auth})
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		write := r.Method != http.MethodGet && r.Method != http.MethodHead && auth != authAlwaysRead
		kind := s.tokenKind(r)
		if kind == tokenSession {
			if err := sessionWriteCheck(r, write || auth == authAlwaysRead); err != nil {
				writeError(w, err)
				return
			}
			kind = tokenOperator
		}
		switch {
		case auth == authAlways || auth == authAlwaysRead:
			if kind != tokenOperator {
				writeError(w, operatorTokenError(kind))
				return
			}
		case auth == authLabStream || (auth == authPostOnly && write):
			if kind == tokenNone {
				writeError(w, NewError(CodeUnauthorized, "Missing or invalid X-CM-LAB-TOKEN", "Fetch /api/config and send its token in the X-CM-LAB-TOKEN header."))
				return
			}
		}
		if write && auth != authNone {
			if s.opts.ReadOnly {
				writeError(w, NewError(CodeForbidden, "this daemon serves a read-only home (a replay): writes are refused", "Run mutations against the live home's daemon, not the replayed one."))
				return
			}
			if err := s.errFn(); err != nil {
				// A retry of a request that already succeeded still gets its
				// snapshot: answering it writes nothing.
				if _, done, _ := s.idem.lookup(strings.TrimSpace(r.Header.Get("X-CM-LAB-REQUEST-ID"))); !done {
					writeError(w, degradedError(err))
					return
				}
			}
		}
		if write {
			r = s.startTrace(r) // stages.go: a no-op without a StageRecorder
		}
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	})
}

// degradedError is the 503 DEGRADED answer while the log is failed; its
// fix names what the cause calls for.
func degradedError(cause error) *APIError {
	return NewError(CodeDegraded, "the log cannot make writes durable: "+cause.Error(), degradedFix(cause))
}

func degradedFix(cause error) string {
	const tail = " Reads keep working; check cmlab status."
	switch {
	case errors.Is(cause, wal.ErrCorrupt):
		// Found by the check of the sealed segments after start
		// (wal.Options.VerifyAfterOpen): a restart finds it again.
		return "The log is damaged before its last segment: stop the daemon (cmlab stop), then run cmlab wal verify and cmlab recover --salvage --apply." + tail
	case errors.Is(cause, syscall.ENOSPC), errors.Is(cause, syscall.EDQUOT):
		return "Free disk space on the home's file system, then restart the daemon (cmlab serve)." + tail
	case isFDShortage(cause):
		return "The daemon ran out of file descriptors writing the log: raise its open-file limit (ulimit -n) or lower serve's --max-conns, then restart the daemon (cmlab serve)." + tail
	case errors.Is(cause, syscall.EIO), errors.Is(cause, syscall.EROFS):
		return "The disk refused the write (I/O error or read-only file system): check the disk and the kernel log (dmesg), then restart the daemon (cmlab serve)." + tail
	}
	return "Fix the cause named in the message (disk, permissions of the home's wal/ directory), then restart the daemon (cmlab serve)." + tail
}

// appendEvent appends evs, timing the append for /metrics and mapping a
// failed or closed log to DEGRADED.
func (s *Server) appendEvent(ctx context.Context, evs ...*events.Event) ([]uint64, error) {
	start := time.Now()
	seqs, err := s.opts.Engine.Append(ctx, evs...)
	s.metrics.observeAppend(time.Since(start), len(evs), err)
	if err != nil {
		if ae, ok := mapError(onAppend, err).(*APIError); ok {
			return nil, ae
		}
		if ctx.Err() != nil {
			return nil, NewError(CodeBusy, "request cancelled before it was appended", "Retry with the same request id.")
		}
		return nil, fmt.Errorf("append: %w", err)
	}
	return seqs, nil
}

// operatorTokenError is the 401 of a route that needs the operator token.
// It never names the token, only where the operator finds it.
func operatorTokenError(kind tokenKind) *APIError {
	msg := "this route needs the operator token"
	if kind == tokenLab {
		msg += "; the Lab token of /api/config opens the Lab routes only"
	}
	return NewError(CodeUnauthorized, msg,
		"Send the operator token from state/token in the daemon's home (readable by its owner only) in X-CM-LAB-TOKEN or Authorization: Bearer; cmlab commands and cmlab mcp do this when run as the home's owner.")
}

// tokenKind says which secret the request carries: X-CM-LAB-TOKEN, else
// Authorization: Bearer; for GET /api/events also ?token= (EventSource
// cannot send headers), which is matched against the Lab token only so
// that the operator token never travels in a URL.
func (s *Server) tokenKind(r *http.Request) tokenKind {
	tok := r.Header.Get("X-CM-LAB-TOKEN")
	if tok == "" {
		// The scheme is case-insensitive (RFC 9110 §11.1): "bearer" too.
		if a := r.Header.Get("Authorization"); len(a) > len("Bearer ") && strings.EqualFold(a[:len("Bearer ")], "Bearer ") {
			tok = strings.TrimLeft(a[len("Bearer "):], " ")
		}
	}
	fromQuery := false
	if tok == "" && r.Method == http.MethodGet && r.URL.Path == "/api/events" {
		tok, fromQuery = r.URL.Query().Get("token"), true
	}
	if tok == "" {
		if s.sessionOpens(r) {
			return tokenSession
		}
		return tokenNone
	}
	// Both compared every time: the answer's timing says nothing of which matched.
	op := subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.OperatorToken)) == 1
	lab := subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.LabToken)) == 1
	switch {
	case op && !fromQuery:
		return tokenOperator
	case lab:
		return tokenLab
	}
	return tokenNone
}

// newSecret draws 32 random bytes in hex: a Lab token per server, the
// operator token of an in-process server.
func newSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("labapi: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// LabToken is the Lab token /api/config hands out.
func (s *Server) LabToken() string { return s.opts.LabToken }

// OperatorToken is the token that opens every route, for in-process callers
// (cmlab mcp without a daemon, Dial); never serve it.
func (s *Server) OperatorToken() string { return s.opts.OperatorToken }

func (s *Server) hostAllowed(host string) bool {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, ""
	}
	_, listenPort, _ := net.SplitHostPort(s.opts.Listen)
	if port != "" && listenPort != "" && listenPort != "0" && port != listenPort {
		return false
	}
	switch h {
	case "localhost", "127.0.0.1", "[::1]", "::1":
		return true
	}
	lh, _, _ := net.SplitHostPort(s.opts.Listen)
	return lh != "" && h == lh && lh != "0.0.0.0" && lh != "::"
}

// originAllowed: a browser's Origin must be exactly the origin the request
// was sent to — "http://" + its Host, byte for byte — and that Host must
// pass hostAllowed with the port the daemon listens on spelled out. So
// "http://localhost" without the port, https://, a trailing slash, "null",
// another port or another of the loopback names are all refused (a page
// on http://localhost:8080 is another origin, whatever it proxies to).
func (s *Server) originAllowed(origin, reqHost string) bool {
	hostPort, ok := strings.CutPrefix(origin, "http://")
	if !ok || hostPort != reqHost || !s.hostAllowed(hostPort) {
		return false
	}
	_, port, err := net.SplitHostPort(hostPort)
	_, listenPort, _ := net.SplitHostPort(s.opts.Listen)
	if err != nil || port == "" {
		return listenPort == "80" // only port 80 may go unspelled
	}
	return listenPort == "" || listenPort == "0" || port == listenPort
}

// readBody reads at most MaxBody bytes; an empty body reads as "{}".
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, NewError(CodeInvalidArgument, "reading request body: "+err.Error(), "")
	}
	if len(b) > MaxBody {
		return nil, NewError(CodePayloadTooLarge, "request body is over 1 MiB", "Send a smaller body.")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("{}"), nil
	}
	return b, nil
}

// decodeJSON parses body into v (a struct); malformed JSON or a non-object
// is INVALID_JSON, a field of the wrong type INVALID_ARGUMENT.
func decodeJSON(body []byte, v any) error {
	// A body json.Unmarshal takes is one the decoder below takes whole
	// (Unmarshal refuses data after the value too); only a refused one
	// goes through the decoder, for the error it has always reported.
	if json.Unmarshal(body, v) == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return NewError(CodeInvalidJSON, "request body must be a JSON object, not "+te.Value, "Send a JSON object.")
			}
			return NewError(CodeInvalidArgument, "field "+te.Field+" must be "+jsonTypeName(te.Type.String()), "Send the field with the documented type.").With("field", te.Field)
		}
		return NewError(CodeInvalidJSON, "request body is not valid JSON: "+err.Error(), "Send a JSON object.")
	}
	// Anything but white space after the value is an error. (Decoder.More
	// reports false for a stray ']' or '}', so it cannot tell.)
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return NewError(CodeInvalidJSON, "request body has data after the JSON value", "Send exactly one JSON object.")
	}
	return nil
}

func jsonTypeName(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map[") || strings.Contains(goType, "struct") || strings.Contains(goType, "."):
		return "an object"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	}
	return goType
}

// registerRoutes wires every route group. Each group lives in its own file.
func (s *Server) registerRoutes() {
	s.registerLabRoutes()
	s.registerEventRoutes()
	s.registerPtyRoutes()
	s.registerStepRoutes()
	s.registerMCPRoutes()
	s.registerConsoleRoutes()
}

// statusWriter records the status and size of a response. It unwraps for
// http.ResponseController (flush, write deadlines of event streams).
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusProbe captures what the mux's own 404/405 handler would answer.
type statusProbe struct {
	h      http.Header
	status int
}

func (p *statusProbe) Header() http.Header {
	if p.h == nil {
		p.h = http.Header{}
	}
	return p.h
}
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }

package labapi

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/pty"
)

// MaxBody is the largest request body accepted (1 MiB).
const MaxBody = 1 << 20

// Options configure a Server.
type Options struct {
	Engine *engine.Engine
	// Listen is the address the daemon listens on (for the Host check).
	Listen string
	// Token is the bearer token required on POSTs and terminal/step routes.
	Token string
	// SessionID is this daemon run's Lab session ("lab_<uuid>").
	SessionID string
	// AllowedRoots are the absolute directories imports may come from.
	AllowedRoots []string
	// ReadOnly refuses every POST (a replayed home).
	ReadOnly bool
	// Pty is the terminal manager; nil disables the terminal routes.
	Pty     *pty.Manager
	Version string
	Logger  *slog.Logger
}

// Server is the HTTP API over one engine.
type Server struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger
	idem *idempotency

	closeOnce sync.Once
	done      chan struct{} // closed by Close: ends SSE streams
}

// Close ends long-lived requests (event streams). It does not close the engine.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

// authMode says what a route requires.
type authMode int

const (
	authPostOnly authMode = iota // Lab routes: token on POST, reads open
	authAlways                   // terminal and step routes: token on every method
	authNone                     // /api/config, /api/health
)

// handlerFunc is a route body; a returned error is written as the envelope.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// New builds a server and registers every route.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("labapi: Options.Engine is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), log: opts.Logger, idem: newIdempotency(), done: make(chan struct{})}
	if err := opts.Engine.Subscribe(s.idem); err != nil {
		return nil, err
	}
	s.registerRoutes()
	return s, nil
}

// Handler is the server's root handler (Host/Origin guard, then the mux).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r.Host) {
		writeError(w, NewError(CodeForbidden, "Host "+r.Host+" is not this daemon", "Connect to 127.0.0.1 or localhost (DNS-rebinding guard)."))
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
		writeError(w, NewError(CodeForbidden, "cross-origin request refused", "Use the Lab page served by this daemon."))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// route registers pattern ("METHOD /path/{var}") with the given auth.
func (s *Server) route(pattern string, auth authMode, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if auth == authAlways || (auth == authPostOnly && r.Method != http.MethodGet && r.Method != http.MethodHead) {
			if !s.tokenOK(r) {
				writeError(w, NewError(CodeUnauthorized, "Missing or invalid X-CM-LAB-TOKEN", "Fetch /api/config and send its token in the X-CM-LAB-TOKEN header."))
				return
			}
		}
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	})
}

func (s *Server) tokenOK(r *http.Request) bool {
	tok := r.Header.Get("X-CM-LAB-TOKEN")
	if tok == "" {
		if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
			tok = strings.TrimPrefix(a, "Bearer ")
		}
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.Token)) == 1
}

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
	return lh != "" && h == lh
}

func (s *Server) originAllowed(origin string) bool {
	for _, p := range []string{"http://", "https://"} {
		if strings.HasPrefix(origin, p) {
			return s.hostAllowed(strings.TrimPrefix(origin, p))
		}
	}
	return false
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
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return NewError(CodeInvalidArgument, "field "+te.Field+" must be "+te.Type.String(), "Send the field with the documented type.")
		}
		return NewError(CodeInvalidJSON, "request body is not valid JSON: "+err.Error(), "Send a JSON object.")
	}
	if dec.More() {
		return NewError(CodeInvalidJSON, "request body has data after the JSON value", "Send exactly one JSON object.")
	}
	return nil
}

// registerRoutes wires every route group. Each group lives in its own file.
func (s *Server) registerRoutes() {
	s.registerLabRoutes()
	s.registerPtyRoutes()
	s.registerStepRoutes()
	s.registerMCPRoutes()
}

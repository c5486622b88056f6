package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// With no daemon, a command opens the home in-process and runs the same
// handlers (labapi.Dial). Two rules hold for the writes it makes there:
//
//   - a home made by 'cmlab replay --into' (state/replayed.json) is
//     history: writes are refused unless --writable, as 'cmlab serve'
//     serves it read-only;
//   - a write that succeeded says where it went, on stderr:
//     "(no daemon: wrote to HOME in-process)", so that nobody believes a
//     daemon they meant to use took it.

// inProcessWrites guards and reports the writes of one in-process client.
type inProcessWrites struct {
	g     *globalOpts
	h     home.Home
	wrote bool
}

// wrap is labapi.DialOptions.WrapLocal.
func (p *inProcessWrites) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		if !p.g.writable {
			m, err := replayedHome(p.h)
			var ce *cliError
			if errors.As(err, &ce) { // a damaged mark
				labapi.WriteError(w, labapi.NewError(ce.Code, ce.Message+": no write went into it", ce.Fix))
				return
			}
			if err != nil {
				labapi.WriteError(w, labapi.NewError(labapi.CodeInternal, err.Error(), ""))
				return
			}
			if m != nil {
				labapi.WriteError(w, labapi.NewError(labapi.CodeForbidden,
					fmt.Sprintf("%s is a replay of %s up to seq %d: it is read-only, and no write went into it", p.h.Dir, m.From, m.UpToSeq),
					"write to the live home ("+m.From+"), or pass --writable to write into the replay anyway"))
				return
			}
		}
		sw := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 || (sw.status >= 200 && sw.status < 300) {
			p.wrote = true
		}
	})
}

// notice says where the writes went, once, when there were any.
func (p *inProcessWrites) notice() {
	if p.wrote && !p.g.json {
		fmt.Fprintf(p.g.stderr, "(no daemon: wrote to %s in-process)\n", p.h.Dir)
	}
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

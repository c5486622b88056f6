package labapi

import (
	"fmt"
	"net/http"
)

// Lab streams against the operator (issue 27 finding 8). Anyone on the
// machine may take the Lab token from /api/config and open /api/events;
// thousands of idle streams once filled the connection cap and every new
// connection, the operator's included, was reset. So Lab-token streams
// are held to Options.LabStreams (by default three quarters of the cap,
// exposure.go); past it a client gets 503 UNAVAILABLE with Retry-After
// and its connection closed, rather than a reset. The operator's CLI
// reaches the daemon over its Unix socket, which the cap does not count,
// and operator-token streams are not counted here.
//
// A stream whose client has gone stops reading the log: it checks its
// request's context every streamCheckEvery events, since a Lab stream
// skips most events and so may write nothing that would fail.

// streamCheckEvery is how many log reads a stream makes between checks
// that its client is still there.
const streamCheckEvery = 64

// labStreamRetryAfter is the Retry-After of a refused Lab stream, seconds.
const labStreamRetryAfter = 5

// holdLabStream counts one Lab stream against the budget; release gives
// it back. Over the budget it answers the error to return.
func (s *Server) holdLabStream(w http.ResponseWriter) (release func(), err error) {
	n := s.labStreams.Add(1)
	if limit := s.opts.LabStreams; limit > 0 && n > int64(limit) {
		s.labStreams.Add(-1)
		w.Header().Set("Retry-After", fmt.Sprint(labStreamRetryAfter))
		w.Header().Set("Connection", "close")
		return nil, NewError(CodeUnavailable, fmt.Sprintf("the daemon holds its budget of %d Lab event streams", limit),
			fmt.Sprintf("Retry after %d seconds (Retry-After); close streams you no longer read. The operator (cmlab CLI, operator token) is not limited by this budget; serve --lab-streams sets it.", labStreamRetryAfter)).
			With("labStreams", limit)
	}
	return func() { s.labStreams.Add(-1) }, nil
}

// streamGone reports whether r's client has gone or the server is closing.
func (s *Server) streamGone(r *http.Request) bool {
	if r.Context().Err() != nil {
		return true
	}
	select {
	case <-s.closing.Done():
		return true
	default:
		return false
	}
}

// SetLabStreams sets the Lab streams' budget once the daemon knows its
// connection cap (before serving).
func (s *Server) SetLabStreams(n int) { s.opts.LabStreams = n }

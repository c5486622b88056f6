package labapi

import (
	"context"
	"net/http"

	"github.com/cmlab/cmlab/mcp"
)

// registerMCPRoutes serves MCP over streamable HTTP at /mcp (SPEC §6): the
// tools of package mcp, each calling this server's own handler in-process
// with the operator token, so a tool goes through exactly the route an HTTP
// client would. The operator token is required on every method (GET
// streams included); the Lab token is refused: the tools drive a shell. The route itself is not a write: a read-only or degraded
// daemon still serves the read tools, and each write tool is refused by the
// route it calls. A stream still open when the server closes is ended, so
// the daemon's shutdown can drain.
func (s *Server) registerMCPRoutes() {
	h := mcp.HTTPHandler(mcp.InProcess(s.Handler(), s.opts.OperatorToken), mcp.HTTPOptions{
		Options: mcp.Options{Version: s.opts.Version, Logger: s.log},
	})
	serve := func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.closing, cancel)
		defer stop()
		h.ServeHTTP(w, r.WithContext(ctx))
		return nil
	}
	// One pattern per method of the streamable transport, so that /mcp
	// coexists with the UI's "GET /{asset}".
	for _, m := range []string{"POST", "GET", "DELETE"} {
		s.route(m+" /mcp", authAlwaysRead, serve)
	}
}

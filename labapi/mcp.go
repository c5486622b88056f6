package labapi

import (
	"context"
	"net/http"

	"github.com/cmlab/cmlab/mcp"
)

// registerMCPRoutes serves MCP over streamable HTTP at /mcp (SPEC §6): the
// tools of package mcp, each calling this server's own handler in-process
// with the daemon's token, so a tool goes through exactly the route an HTTP
// client would. The token is required on every method (GET streams
// included). The route itself is not a write: a read-only or degraded
// daemon still serves the read tools, and each write tool is refused by the
// route it calls. A stream still open when the server closes is ended, so
// the daemon's shutdown can drain.
func (s *Server) registerMCPRoutes() {
	h := mcp.HTTPHandler(mcp.InProcess(s.Handler(), s.opts.Token), mcp.HTTPOptions{
		Options: mcp.Options{Version: s.opts.Version, Logger: s.log},
	})
	serve := func(w http.ResponseWriter, r *http.Request) error {
		if !s.tokenOK(r) {
			return NewError(CodeUnauthorized, "Missing or invalid X-CM-LAB-TOKEN", "Send the daemon's token (state/token) in X-CM-LAB-TOKEN or Authorization: Bearer on every /mcp request.")
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-s.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		h.ServeHTTP(w, r.WithContext(ctx))
		return nil
	}
	// One pattern per method of the streamable transport, so that /mcp
	// coexists with the UI's "GET /{asset}".
	for _, m := range []string{"POST", "GET", "DELETE"} {
		s.route(m+" /mcp", authNone, serve)
	}
}

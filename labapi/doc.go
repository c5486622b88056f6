// Package labapi is cmlab's HTTP face (SPEC §6): the Lab API, wire-compatible
// with content-machine's Experiment Lab, the terminal bridge, the step
// routes and the event stream, with their error envelope, request-id dedupe
// and auth. Every mutation goes through engine.Append; reads come from the
// views and from in-memory observers of the log.
//
// Files: server.go (options, mux, middleware), errors.go (the one mapping
// from errors to HTTP codes), idempotency.go (request-id dedupe), lab*.go
// (Lab routes), pty.go (terminal bridge), steps.go (step routes),
// events.go (SSE).
package labapi

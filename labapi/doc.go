// Package labapi is cmlab's HTTP face (SPEC §6): the Lab API, wire-compatible
// with content-machine's Experiment Lab, the terminal bridge, the step
// routes and the event stream, with their error envelope, request-id dedupe
// and auth. Every mutation goes through engine.Append; reads come from the
// views and from in-memory observers of the log.
//
// Files: server.go (options, mux, middleware), errors.go (the one mapping
// from errors to HTTP codes), idempotency.go (request-id dedupe), lab*.go
// (Lab routes), pty.go (terminal bridge), steps.go (step routes),
// events.go (SSE), client.go (the daemon client).
//
// # The daemon client
//
// Every CLI command that reads or mutates the lab goes through a Client:
//
//	c, closeFn, err := labapi.Dial(ctx, h, labapi.DialOptions{})
//	defer closeFn()
//	var out struct{ FeedbackID string `json:"feedbackId"` }
//	err = c.Do(ctx, "POST", "/api/feedback", reqID, body, &out)
//
// Dial reads state/daemon.json ({pid, listen, tokenFile, …}, written by
// `cmlab serve` once it listens and removed on clean shutdown). When it
// names a live pid, the client sends HTTP requests to that address with
// the token from tokenFile (X-CM-LAB-TOKEN) and the request id
// (X-CM-LAB-REQUEST-ID). When no daemon runs (no file, or a dead pid),
// Dial opens the home's engine in this process — taking the log's lock,
// repairing and catching up as serve would — builds the same Server and
// calls its Handler in-process, so validation and errors are the same code
// path. closeFn closes that engine. A non-2xx answer comes back as
// *APIError with the envelope's code, message and context (Fix()).
package labapi

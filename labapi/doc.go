// Package labapi is cmlab's HTTP face (SPEC §6): the Lab API, wire-compatible
// with content-machine's Experiment Lab, the terminal bridge, the step
// routes and the event stream, with their error envelope, request-id dedupe
// and auth. Every mutation goes through engine.Append; reads come from the
// views and from in-memory observers of the log.
//
// Files: server.go (options, mux, middleware: panic recovery, request log,
// metrics, Host/Origin guard, auth, read-only and degraded refusal),
// errors.go (the one mapping from errors to HTTP codes: errTable, rows of
// sentinel errors of the packages below → envelope code, message and fix,
// scoped to the routes that answer them; mapError and asAPIError read
// it; statusOf maps codes to HTTP statuses), idempotency.go
// (request-id dedupe over the engine's on-disk index, package reqindex),
// lab.go (Lab routes), labstore.go and labstore_file.go (the runs,
// experiments and sessions read model: an engine observer over the Lab
// store, state/labstore.db, read per request), labstate.go (its opening),
// lab_lists.go (the list routes, streamed), feedback_poll.go (the byte
// cursor of seed 000), runs.go (import canonicalization, fingerprint,
// artifact allow-list; every run file is read through package confine),
// events.go (the event stream), eventstream.go (the text/event-stream
// framing it and the console's playback share), metrics.go (/metrics through
// prometheus/client_golang; names in docs/metrics.md), paging.go (the
// paging extension of the list routes), feedback_index.go (a run's
// feedback count and latest entries, a cache over feedback.jsonl),
// export_download.go (GET /api/exports/{name}); GET / and /ui/ serve
// Options.Page (package labui, handed in by package daemon) unless
// Options.UIDir names another client, and lab_firstpage.go hands that page
// the first page of runs for its HTML (RunsPage); client.go (the daemon
// client), pty.go (terminal bridge: also
// interrupt, GET /api/pty listing the shell slots, and wait_ms on a block's
// output to stream it), steps.go (step routes, recording through the
// daemon's one step journal, Options.Journal, which package daemon builds
// and shares with start-up recovery), mcp.go (MCP over HTTP).
//
// The server is built by package daemon (the composition root: `cmlab
// serve`, `cmlab mcp`, in-process CLI commands), which hands New the
// engine, the one step journal and the retention model; New requires
// them and builds none of its own.
//
// # Invariants
//
//   - A 200 to a mutation is written only after engine.Append returned, so
//     the event is fsynced and, unless the views lag the log (a projection
//     failed after the fsync; /api/health "views":"behind"), projected.
//   - Running out of file descriptors, or views that cannot yet catch up,
//     is 503 UNAVAILABLE with Retry-After, never DEGRADED: only a failed
//     write or fsync of the log degrades it, and the DEGRADED fix names
//     the cause (disk full, descriptors, I/O error).
//   - A mutation with a request id appends exactly one event carrying req,
//     rh and the response snapshot; the request-id index is a projection
//     of the log fed before the 200 (on disk, covering a recorded seq), so
//     dedupe survives restarts and cannot be torn from the mutation. A request that changes nothing (re-import of an unchanged
//     run) appends one idempotency.recorded event instead.
//   - Validation that depends on state (experiment status, import by
//     realpath) and the append that changes it run under one mutex, so two
//     distinct concurrent submits cannot both succeed.
//   - A rejected request appends nothing. Writes are refused with 503
//     DEGRADED while the log is failed, and with 403 on a read-only server.
//   - Two secrets (SPEC §6): the Lab token, which GET /api/config serves to
//     anyone on loopback, opens the Lab routes (authPostOnly) and the Lab
//     events of /api/events (labStreamTypes) only; the operator token of
//     state/token opens everything and is never written to a response or
//     the log. Every route declares which it needs when it is registered
//     (Server.route), and the auth tests hold each registered route to it.
//   - An Origin, when sent, is exactly "http://" + Host with the daemon's
//     port; Host is a loopback name or the listen address.
//   - The event stream reads the log itself (woken by Log().Changed()), so
//     a slow client never holds up appends; a client whose writes stall
//     past SSEWriteTimeout is dropped and resumes with Last-Event-ID.
//
// # The daemon client
//
// Every CLI command that reads or mutates the lab goes through a Client:
//
//	c, closeFn, err := daemon.Dial(ctx, h)
//	defer closeFn()
//	var out struct{ FeedbackID string `json:"feedbackId"` }
//	err = c.Do(ctx, "POST", "/api/feedback", reqID, body, &out)
//
// Dial reads state/daemon.json ({pid, listen, socket, pidStart, bootId,
// tokenFile, …}, written by `cmlab serve` once it listens and removed on
// clean shutdown). The daemon it names is live only while it holds
// state/daemon.lock and its pid runs with the recorded start time in the
// recorded boot (package discovery); the client then sends HTTP requests
// over the daemon's Unix socket, state/daemon.sock, after checking the
// listener's credentials (SO_PEERCRED), with the operator token from
// tokenFile (X-CM-LAB-TOKEN) and the request id (X-CM-LAB-REQUEST-ID). The
// token never crosses TCP. When no daemon runs (no file, or a stale one:
// *StaleDaemonError says why),
// daemon.Dial opens the home in this process (daemon.Open, one-shot) —
// taking the log's lock, repairing and catching up as serve would — with
// the same Server (with
// an operator token of its own that never leaves the process) and calls
// its Handler in-process, so validation and errors are the same code
// path. closeFn closes that engine. A non-2xx answer comes back as
// *APIError with the envelope's code, message and context (Fix()). The
// requests, the in-process exchange and the reading of error bodies are
// package wire's, which mcp's backend shares.
package labapi

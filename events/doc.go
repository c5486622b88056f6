// Package events defines what the cmlab log stores: the event envelope, the
// registry of event types with their typed payloads and schema versions, the
// deterministic msgpack encoding of both, and the upcasting of payloads
// written by older versions.
//
// # Envelope
//
// Every log entry carries one Event (SPEC §3):
//
//	seq    uint64  the WAL index of the entry; stored so that verification can
//	               prove order and a salvage can re-find its place
//	v      int     schema version of the payload type
//	id     string  UUIDv7
//	type   string  registered event type, e.g. "feedback.submitted"
//	ts     int64   unix milliseconds, set when the event is appended
//	stream string  aggregate id: Lab session, conversation, mandate …
//	req    string  request id of the client request that caused it (optional)
//	rh     string  hash of that request's body, to tell a retry from a reused key
//	resp   bytes   the JSON response snapshot returned for req (optional)
//	data   bytes   msgpack-encoded typed payload
//
// An event that carries req records the request: the idempotency map is
// rebuilt from req, rh and resp of any event, so a mutation and the record
// of the request that caused it are one entry and can never be torn apart by
// a crash.
//
// # Determinism
//
// Encoding is a pure function of the value: struct fields are written in
// declaration order, map keys sorted, and payload structs use fixed types
// (json.RawMessage for free-form JSON, compacted by the producer). The same
// event always encodes to the same bytes, which is what lets a rebuild
// reproduce every view byte for byte.
//
// Payload structs carry only `json` tags; msgpack reads them too, so the
// field names of the log, of `cmlab wal dump` and of the JSONL views agree.
//
// # Versions and upcasting
//
// Each type has a current schema version. Decoding a payload stored under an
// older version runs the registered upcasters in order (v1→v2→…) over the
// payload as a generic map before decoding it into the current struct. A
// payload from a newer version than this binary knows is an error
// (ErrUnknownVersion), never guessed at.
//
// A field added as optional, whose absence means what the payload meant
// before it existed, needs no new version: the content-machine record shapes
// of the Lab (RunReports' syncReportPath keys, MetricsRead on metrics,
// LabExperiment.Sparse) were added so, and a payload without them projects
// to exactly the bytes it did before they existed; so were step.executing's
// process fields (pid, pid_start, boot_id, runner_pid, runner_start:
// absent, no process was recorded). Their JSON is written by
// the records' MarshalJSON methods (labjson.go), which the projector's
// encoders match byte for byte.
//
// This package depends on nothing else of cmlab.
package events

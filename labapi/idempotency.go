package labapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/reqindex"
)

// idempotency answers "was this request id done, and with what response"
// from the home's on-disk request-id index (package reqindex, fed by the
// engine as events commit), so the answers survive restarts without living
// in the heap. Only the per-key single flight is in memory: it is bounded
// by the requests in progress, and makes concurrent duplicates act once.
type idempotency struct {
	idx      *reqindex.Index
	mu       sync.Mutex
	inflight map[string]*keyLock
}

// keyLock serialises one request id; refs counts holders and waiters so
// the entry is dropped when the last one leaves.
type keyLock struct {
	mu   sync.Mutex
	refs int
}

func newIdempotency(idx *reqindex.Index) *idempotency {
	return &idempotency{idx: idx, inflight: map[string]*keyLock{}}
}

// lookup is the stored answer of req. An index that cannot be read is an
// INTERNAL error: acting without knowing could act twice.
func (m *idempotency) lookup(req string) (reqindex.Record, bool, error) {
	if req == "" {
		return reqindex.Record{}, false, nil
	}
	r, ok, err := m.idx.Lookup(req)
	if err != nil {
		return r, false, NewError(CodeInternal, "the request-id index cannot be read: "+err.Error(),
			"Retry with the same request id; if it persists, stop the daemon and run cmlab rebuild.")
	}
	return r, ok, nil
}

// lock serialises work on one request id; the returned func unlocks.
func (m *idempotency) lock(req string) func() {
	m.mu.Lock()
	l, ok := m.inflight[req]
	if !ok {
		l = &keyLock{}
		m.inflight[req] = l
	}
	l.refs++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.inflight, req)
		}
		m.mu.Unlock()
	}
}

// bodyFields is the request body's top-level object, parsed once for
// the request id and the body hash; nil when the body is not one.
func bodyFields(body []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	return m
}

// requestID is the trimmed X-CM-LAB-REQUEST-ID header, else the body's
// requestId (or request_id) field. A body field that is there but not a
// string (a number, an object, a boolean; null counts as absent) is
// INVALID_ARGUMENT, header or not: a client that sends one believes its
// request is deduplicated, and silently ignoring the id would act twice.
// fields is bodyFields(body) when the body is not plain (jsonbody.go).
func requestID(r *http.Request, body *jsonBody, fields map[string]json.RawMessage) (string, error) {
	var fromBody string
	if body.plain || fields != nil {
		var id, id2 json.RawMessage
		ok := false
		if body.plain {
			id, id2, ok = requestIDMembers(body.members)
		} else {
			id, id2, ok = requestIDFields(fields)
		}
		if !ok {
			// A key that only case-folds to a field name (encoding/json
			// matches those too): let the decoder pick, as it always did.
			var probe struct {
				RequestID  json.RawMessage `json:"requestId"`
				RequestID2 json.RawMessage `json:"request_id"`
			}
			json.Unmarshal(body.raw, &probe)
			id, id2 = probe.RequestID, probe.RequestID2
		}
		for _, f := range [...]struct {
			name string
			raw  json.RawMessage
		}{{"requestId", id}, {"request_id", id2}} {
			if len(f.raw) == 0 || string(f.raw) == "null" {
				continue
			}
			s, ok := stringValue(f.raw)
			if !ok && json.Unmarshal(f.raw, &s) != nil {
				return "", NewError(CodeInvalidArgument, f.name+" must be a string, not "+truncate(string(f.raw), 40),
					"Send the request id as a JSON string (or in the X-CM-LAB-REQUEST-ID header).").With("field", f.name)
			}
			if s = strings.TrimSpace(s); s != "" && fromBody == "" {
				fromBody = s
			}
		}
	}
	if h := strings.TrimSpace(r.Header.Get("X-CM-LAB-REQUEST-ID")); h != "" {
		return h, nil
	}
	return fromBody, nil
}

// requestIDMembers is requestIDFields for a plain body's members.
func requestIDMembers(members []jsonMember) (id, id2 json.RawMessage, ok bool) {
	for _, m := range members {
		switch k := string(m.key); {
		case k == "requestId":
			id = m.value
		case k == "request_id":
			id2 = m.value
		case strings.EqualFold(k, "requestId") || strings.EqualFold(k, "request_id"):
			return nil, nil, false
		}
	}
	return id, id2, true
}

// requestIDFields reads the requestId and request_id fields of a parsed
// body; ok is false when another key case-folds to either name.
func requestIDFields(fields map[string]json.RawMessage) (id, id2 json.RawMessage, ok bool) {
	for k, v := range fields {
		switch {
		case k == "requestId":
			id = v
		case k == "request_id":
			id2 = v
		case strings.EqualFold(k, "requestId") || strings.EqualFold(k, "request_id"):
			return nil, nil, false
		}
	}
	return id, id2, true
}

// bodyHash is the hash of a request body for telling a retry from a reused
// key: route plus compacted JSON, without the requestId fields. These
// hashes are stored in the log and compared with a retry's after an
// upgrade, so the bytes hashed never change: for an object, what
// json.Marshal makes of it parsed into a map[string]json.RawMessage less
// those two keys (built in place for a plain body, jsonBody.canonical);
// else the compacted body, or the body as it is when it is not JSON.
// fields is bodyFields(body) when the body is not plain (it loses those
// two keys).
func bodyHash(route string, body *jsonBody, fields map[string]json.RawMessage) string {
	buf := make([]byte, 0, 1024) // on the stack; a larger body grows it
	buf = append(append(buf, route...), 0)
	switch {
	case body.plain:
		buf = body.canonical(buf)
	case fields != nil:
		delete(fields, "requestId")
		delete(fields, "request_id")
		if b, err := json.Marshal(fields); err == nil { // map keys sorted
			buf = append(buf, b...)
		} else {
			buf = append(buf, body.raw...)
		}
	default:
		var c bytes.Buffer
		if json.Compact(&c, body.raw) == nil {
			buf = append(buf, c.Bytes()...)
		} else {
			buf = append(buf, body.raw...)
		}
	}
	sum := sha256.Sum256(buf)
	var out [len("sha256-") + 2*sha256.Size]byte
	copy(out[:], "sha256-")
	hex.Encode(out[len("sha256-"):], sum[:])
	return string(out[:])
}

// MaxRequestID is the longest request id accepted (it is stored in the log).
const MaxRequestID = 256

// mutation is the body of a mutating route once its request id is known.
// It must validate, append exactly one event carrying req, reqHash and the
// response snapshot (events.Event.WithRequest) when req is non-empty, and
// return that response.
type mutation func(req, reqHash string) (resp any, err error)

// idempotent runs act at most once per request id (SPEC §6): a repeated id
// returns the stored snapshot before any validation; the same id with a
// different body is IDEMPOTENCY_KEY_REUSED; concurrent duplicates wait for
// the first. Without a request id, act simply runs.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, route string, body []byte, act mutation) error {
	return s.idempotentBody(w, r, route, parseBody(body), act)
}

// idempotentBody is idempotent for a body already read into a jsonBody.
func (s *Server) idempotentBody(w http.ResponseWriter, r *http.Request, route string, body *jsonBody, act mutation) error {
	t := s.traceOf(r.Context()) // nil unless a StageRecorder is installed
	var fields map[string]json.RawMessage
	if !body.plain {
		fields = bodyFields(body.raw)
	}
	req, err := requestID(r, body, fields)
	if err != nil {
		return err
	}
	if req == "" {
		resp, err := act("", "")
		if err != nil {
			return err
		}
		writeAnswer(w, resp)
		t.done()
		return nil
	}
	if len(req) > MaxRequestID {
		return NewError(CodeInvalidArgument, "request id is longer than 256 bytes", "Send a UUID in X-CM-LAB-REQUEST-ID.")
	}
	hash := bodyHash(route, body, fields)
	t.mark(StageDecode)
	unlock := s.idem.lock(req)
	defer unlock()
	rec, ok, err := s.idem.lookup(req)
	if err != nil {
		return err
	}
	if ok {
		if rec.Hash != hash {
			return NewError(CodeIdempotencyKeyReused, "request id "+req+" was used with a different body", "Use a new request id for a new request.").With("requestId", req)
		}
		w.Header().Set("X-CM-LAB-IDEMPOTENT-REPLAY", "true")
		writeRaw(w, http.StatusOK, rec.Resp)
		return nil
	}
	t.mark(StageRequestID)
	resp, err := act(req, hash)
	if err != nil {
		return err
	}
	writeAnswer(w, resp)
	t.done()
	return nil
}

// writeAnswer writes a mutation's answer with status 200: resp as JSON,
// or as it is when it is already JSON (json.RawMessage: the bytes of the
// snapshot appendAnswer stored, so they are encoded once).
func writeAnswer(w http.ResponseWriter, resp any) {
	if raw, ok := resp.(json.RawMessage); ok {
		writeRaw(w, http.StatusOK, raw)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// decodeIdempotent reads the request body and runs act at most once per
// request id (s.idempotent) on the body decoded into a B.
func decodeIdempotent[B any](s *Server, w http.ResponseWriter, r *http.Request, route string, act func(b *B, req, reqHash string) (any, error)) error {
	t := s.traceOf(r.Context())
	body, err := readBody(r)
	if err != nil {
		return err
	}
	t.mark(StageRead)
	jb := parseBody(body)
	return s.idempotentBody(w, r, route, jb, func(req, reqHash string) (any, error) {
		var b B
		if d, ok := any(&b).(membersDecoder); !ok || !jb.plain || !d.decodeMembers(jb.members) {
			b = *new(B)
			if err := decodeJSON(body, &b); err != nil {
				return nil, err
			}
		}
		return act(&b, req, reqHash)
	})
}

// membersDecoder is a route's body struct that fills itself from a plain
// body's members (jsonbody.go) exactly as json.Unmarshal would, or
// reports false for a body it leaves to json.Unmarshal (a value of
// another type, a key that only case-folds to a field's name).
type membersDecoder interface {
	decodeMembers(members []jsonMember) bool
}

// appendAnswer appends p as an event of stream. With a request id the event
// also carries req, its body hash and resp: the snapshot a retry of the
// request gets back (see mutation). A resp that is a json.RawMessage is
// stored as it is (it must be what json.Marshal makes of the answer).
func (s *Server) appendAnswer(ctx context.Context, stream string, p events.Payload, req, reqHash string, resp any) error {
	ev, err := events.New(stream, p)
	if err != nil {
		return err
	}
	if req != "" {
		snap, ok := resp.(json.RawMessage)
		if !ok {
			if snap, err = json.Marshal(resp); err != nil {
				return err
			}
		}
		ev.WithRequest(req, reqHash, snap)
	}
	t := s.traceOf(ctx)
	t.mark(StageDecode)
	_, err = s.appendEvent(ctx, ev)
	t.markAppend()
	return err
}

// The header values of a JSON answer, shared by every writeRaw: net/http
// only reads a header's value slice, and a handler that sets the header
// again replaces the slice (Header.Set) or appends past its capacity
// (Header.Add), never writing into it.
var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	noStore         = []string{"no-store"}
	newline         = []byte{'\n'}
)

// writeRaw writes body, a JSON value, and a newline with status; the
// header is what writeJSON sets, without a copy of the body or the values.
func writeRaw(w http.ResponseWriter, status int, body json.RawMessage) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(status)
	w.Write(body)
	w.Write(newline)
}

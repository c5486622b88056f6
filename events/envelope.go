package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// Errors returned by decoding.
var (
	// ErrUnknownType is returned for a type that is not registered.
	ErrUnknownType = errors.New("events: unknown event type")
	// ErrUnknownVersion is returned for a payload version newer than this binary knows.
	ErrUnknownVersion = errors.New("events: unknown schema version")
	// ErrMalformed is returned for bytes that are not a valid envelope or payload.
	ErrMalformed = errors.New("events: malformed event")
)

// Event is the envelope of one log entry. Data holds the msgpack-encoded
// payload; use Decode or New to move between it and the typed structs.
type Event struct {
	Seq     uint64             `json:"seq"`
	V       int                `json:"v"`
	ID      string             `json:"id"`
	Type    string             `json:"type"`
	TS      int64              `json:"ts"`
	Stream  string             `json:"stream"`
	Req     string             `json:"req,omitempty"`
	ReqHash string             `json:"rh,omitempty"`
	Resp    json.RawMessage    `json:"resp,omitempty"`
	Data    msgpack.RawMessage `json:"data"`
}

// Payload is implemented by every typed event payload.
type Payload interface {
	EventType() string
}

// New builds an event of payload's type on stream: a fresh UUIDv7 id, the
// type's current version and the encoded payload. Seq and TS are left for
// the log to set at append (TS only if zero).
func New(stream string, p Payload) (*Event, error) {
	t := p.EventType()
	info, ok := lookup(t)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, t)
	}
	data, err := Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("events: encode %s: %w", t, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("events: new id: %w", err)
	}
	return &Event{V: info.Version, ID: id.String(), Type: t, Stream: stream, Data: data}, nil
}

// MustNew is New for payloads known to be registered and encodable; it
// panics otherwise. Meant for tests and fixed, program-built payloads.
func MustNew(stream string, p Payload) *Event {
	ev, err := New(stream, p)
	if err != nil {
		panic(err)
	}
	return ev
}

// WithRequest sets the request id, request hash and response snapshot.
func (e *Event) WithRequest(req, reqHash string, resp json.RawMessage) *Event {
	e.Req, e.ReqHash, e.Resp = req, reqHash, resp
	return e
}

// Time returns TS as a time.
func (e *Event) Time() time.Time { return time.UnixMilli(e.TS).UTC() }

// ISOTime is TS formatted as content-machine writes createdAt:
// RFC 3339 in UTC with milliseconds ("2026-02-06T00:00:00.000Z").
func (e *Event) ISOTime() string { return FormatISO(e.TS) }

// FormatISO formats unix milliseconds as an RFC 3339 UTC time with milliseconds.
func FormatISO(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// Decode returns the typed payload of the event, upcast to the current
// version of its type.
func (e *Event) Decode() (Payload, error) {
	info, ok := lookup(e.Type)
	if !ok {
		return nil, fmt.Errorf("%w: %q (seq %d)", ErrUnknownType, e.Type, e.Seq)
	}
	raw := []byte(e.Data)
	if e.V > info.Version || e.V < 1 {
		return nil, fmt.Errorf("%w: %s v%d (this binary knows v%d)", ErrUnknownVersion, e.Type, e.V, info.Version)
	}
	if e.V < info.Version {
		var err error
		raw, err = upcast(info, e.V, raw)
		if err != nil {
			return nil, fmt.Errorf("events: upcast %s v%d (seq %d): %w", e.Type, e.V, e.Seq, err)
		}
	}
	p := info.New()
	if err := Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("%w: %s payload (seq %d): %v", ErrMalformed, e.Type, e.Seq, err)
	}
	return p, nil
}

// DecodeAs decodes the payload of e into a *T, failing if the type differs.
func DecodeAs[T Payload](e *Event) (T, error) {
	var zero T
	p, err := e.Decode()
	if err != nil {
		return zero, err
	}
	t, ok := p.(T)
	if !ok {
		return zero, fmt.Errorf("events: seq %d is %s, not %T", e.Seq, e.Type, zero)
	}
	return t, nil
}

// EncodeEnvelope returns the deterministic msgpack bytes of the envelope.
func EncodeEnvelope(e *Event) ([]byte, error) { return Marshal(e) }

// DecodeEnvelope parses envelope bytes. It checks the shape only (fields
// present, type non-empty, version ≥ 1); the payload stays encoded.
func DecodeEnvelope(b []byte) (*Event, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	var e Event
	if err := Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if e.Type == "" || e.V < 1 || e.ID == "" {
		return nil, fmt.Errorf("%w: envelope lacks type, version or id", ErrMalformed)
	}
	return &e, nil
}

var encPool = sync.Pool{New: func() any {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("json")
	enc.SetSortMapKeys(true)
	return &pooledEncoder{buf: &buf, enc: enc}
}}

type pooledEncoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// Marshal encodes v as deterministic msgpack using the json tags.
func Marshal(v any) ([]byte, error) {
	pe := encPool.Get().(*pooledEncoder)
	defer encPool.Put(pe)
	pe.buf.Reset()
	if err := pe.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(pe.buf.Bytes()), nil
}

var decPool = sync.Pool{New: func() any {
	dec := msgpack.NewDecoder(nil)
	dec.SetCustomStructTag("json")
	return dec
}}

// Unmarshal decodes msgpack bytes into v using the json tags. Trailing
// bytes after the value are an error.
//
// b is first walked (ValueLen): the decoder allocates a str or bin, and
// skips an unknown field's bytes, by the length its header declares,
// before it finds the bytes missing; and its buffer, kept in the pool,
// grew by a quarter on every such call (a fuzzed envelope claiming 2 GB
// took a worker past 16 GB). Walked first, nothing declared can be
// longer than b.
func Unmarshal(b []byte, v any) error {
	n, err := ValueLen(b)
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-n)
	}
	dec := decPool.Get().(*msgpack.Decoder)
	defer decPool.Put(dec)
	r := bytes.NewReader(b)
	dec.Reset(r)
	dec.SetCustomStructTag("json")
	if err := dec.Decode(v); err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d trailing bytes", r.Len())
	}
	return nil
}

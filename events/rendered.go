package events

import "encoding/json"

// The JSON views of an event, each the envelope with its payload decoded
// (upcast to the current version), in the one place they are defined:
//
//	Rendered  people and pages: cmlab replay print --json, trace, the
//	          console's log pages; an undecodable payload named in
//	          decodeError, data left out
//	Dumped    cmlab wal dump: data always present, an undecodable
//	          payload's raw bytes (base64) with data_error, a resp that is
//	          not JSON left out
//	Streamed  a data line of GET /api/events (SSE): no time, rh or resp;
//	          data null for an undecodable payload
//
// The three differ where their readers were promised different things
// (the dump's and the stream's fields are held by their tests).

// EnvelopeJSON is the envelope's fields as Rendered and Dumped begin:
// embedded, its fields are theirs, in this order, in their JSON.
type EnvelopeJSON struct {
	Seq     uint64          `json:"seq"`
	V       int             `json:"v"`
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	TS      int64           `json:"ts"`
	Time    string          `json:"time"`
	Stream  string          `json:"stream"`
	Req     string          `json:"req,omitempty"`
	ReqHash string          `json:"rh,omitempty"`
	Resp    json.RawMessage `json:"resp,omitempty"`
}

// envelopeJSON is ev's envelope fields but its response, which each view
// treats in its own way.
func envelopeJSON(ev *Event) EnvelopeJSON {
	return EnvelopeJSON{Seq: ev.Seq, V: ev.V, ID: ev.ID, Type: ev.Type, TS: ev.TS, Time: ev.ISOTime(),
		Stream: ev.Stream, Req: ev.Req, ReqHash: ev.ReqHash}
}

// Rendered is the JSON form of an event for people and pages.
type Rendered struct {
	EnvelopeJSON
	Data        json.RawMessage `json:"data,omitempty"`
	DecodeError string          `json:"decodeError,omitempty"`
}

// Render decodes ev's payload for display; a payload that does not
// decode is named in DecodeError instead.
func Render(ev *Event) Rendered {
	r := Rendered{EnvelopeJSON: envelopeJSON(ev)}
	if len(ev.Resp) > 0 {
		if json.Valid(ev.Resp) {
			r.Resp = ev.Resp
		} else {
			r.Resp, _ = json.Marshal(string(ev.Resp))
		}
	}
	p, err := ev.Decode()
	if err != nil {
		r.DecodeError = err.Error()
		return r
	}
	if r.Data, err = json.Marshal(p); err != nil {
		r.DecodeError = err.Error()
	}
	return r
}

// Dumped is an event as cmlab wal dump prints it (one JSON object a line).
type Dumped struct {
	EnvelopeJSON
	Data      any    `json:"data"`
	DataError string `json:"data_error,omitempty"`
}

// Dump is ev as cmlab wal dump prints it.
func Dump(ev *Event) Dumped {
	d := Dumped{EnvelopeJSON: envelopeJSON(ev)}
	if len(ev.Resp) > 0 && json.Valid(ev.Resp) {
		d.Resp = ev.Resp
	}
	p, err := ev.Decode()
	if err != nil {
		d.DataError = err.Error()
		d.Data = []byte(ev.Data) // base64 in JSON
	} else {
		d.Data = p
	}
	return d
}

// Streamed is the JSON of one SSE data line of GET /api/events.
type Streamed struct {
	Seq    uint64          `json:"seq"`
	V      int             `json:"v"`
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	TS     int64           `json:"ts"`
	Stream string          `json:"stream"`
	Req    string          `json:"req,omitempty"`
	Data   json.RawMessage `json:"data"`
}

// Stream is ev as an SSE data line carries it.
func Stream(ev *Event) Streamed {
	se := Streamed{Seq: ev.Seq, V: ev.V, ID: ev.ID, Type: ev.Type, TS: ev.TS, Stream: ev.Stream, Req: ev.Req}
	if p, err := ev.Decode(); err == nil {
		se.Data, _ = json.Marshal(p)
	}
	if se.Data == nil {
		se.Data = json.RawMessage("null")
	}
	return se
}

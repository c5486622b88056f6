package events

import "encoding/json"

// Rendered is the JSON form of an event for people and pages: the
// envelope with its payload decoded (upcast to the current version) as
// JSON. cmlab replay print --json, trace and the console's log pages show
// events in this one form.
type Rendered struct {
	Seq         uint64          `json:"seq"`
	V           int             `json:"v"`
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	TS          int64           `json:"ts"`
	Time        string          `json:"time"`
	Stream      string          `json:"stream"`
	Req         string          `json:"req,omitempty"`
	ReqHash     string          `json:"rh,omitempty"`
	Resp        json.RawMessage `json:"resp,omitempty"`
	Data        json.RawMessage `json:"data,omitempty"`
	DecodeError string          `json:"decodeError,omitempty"`
}

// Render decodes ev's payload for display; a payload that does not
// decode is named in DecodeError instead.
func Render(ev *Event) Rendered {
	r := Rendered{Seq: ev.Seq, V: ev.V, ID: ev.ID, Type: ev.Type, TS: ev.TS, Time: ev.ISOTime(),
		Stream: ev.Stream, Req: ev.Req, ReqHash: ev.ReqHash}
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

package projections

import (
	"bytes"
	"sync"

	"github.com/cmlab/cmlab/events"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// A fast path for the most common payload of a Lab log, feedback.submitted:
// decoding it field by field instead of through reflection roughly halves
// its cost in a rebuild. Anything it does not expect (an older version, a
// rarely set nested field, an unknown key, a surprising type) makes it
// give up, and the event goes through events.Event.Decode as every other;
// TestFastDecodeMatchesReflective holds the two to the same result.

type fastDecoder struct {
	r bytes.Reader
	d *msgpack.Decoder
}

var fastDecPool = sync.Pool{New: func() any {
	fd := &fastDecoder{}
	fd.d = msgpack.NewDecoder(&fd.r)
	return fd
}}

// decodePayload is ev.Decode with the fast path.
func decodePayload(ev *events.Event) (events.Payload, error) {
	if ev.Type == events.TypeFeedbackSubmitted && ev.V == 1 {
		if p, ok := fastFeedbackSubmitted(ev.Data); ok {
			return p, nil
		}
	}
	return ev.Decode()
}

func fastFeedbackSubmitted(data []byte) (*events.FeedbackSubmitted, bool) {
	fd := fastDecPool.Get().(*fastDecoder)
	defer fastDecPool.Put(fd)
	fd.r.Reset(data)
	fd.d.Reset(&fd.r)
	d := fd.d
	n, err := d.DecodeMapLen()
	if err != nil || n != 1 {
		return nil, false
	}
	if k, err := d.DecodeString(); err != nil || k != "entry" {
		return nil, false
	}
	p := &events.FeedbackSubmitted{}
	if !fastFeedbackEntry(d, &p.Entry) || fd.r.Len() != 0 {
		return nil, false
	}
	return p, true
}

func fastFeedbackEntry(d *msgpack.Decoder, e *events.FeedbackEntry) bool {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return false
	}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return false
		}
		ok := true
		switch k {
		case "schemaVersion":
			e.SchemaVersion, err = d.DecodeInt()
		case "id":
			e.ID, err = d.DecodeString()
		case "createdAt":
			e.CreatedAt, err = d.DecodeString()
		case "sessionId":
			e.SessionID, err = d.DecodeString()
		case "runId":
			e.RunID, err = d.DecodeString()
		case "experimentId":
			e.ExperimentID, err = d.DecodeString()
		case "variantId":
			e.VariantID, err = d.DecodeString()
		case "topic":
			e.Topic, err = d.DecodeString()
		case "videoPath":
			e.VideoPath, err = d.DecodeString()
		case "artifactsDir":
			e.ArtifactsDir, err = d.DecodeString()
		case "notes":
			e.Notes, err = d.DecodeString()
		case "ratings":
			e.Ratings, ok = fastRatings(d)
		case "tags":
			e.Tags, ok = fastStrings(d)
		default:
			return false // autoMetricsSnapshot, answers, reports, extra, unknown
		}
		if err != nil || !ok {
			return false
		}
	}
	return true
}

func fastRatings(d *msgpack.Decoder) (*events.Ratings, bool) {
	if c, err := d.PeekCode(); err != nil || c == msgpcode.Nil {
		return nil, false
	}
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, false
	}
	r := &events.Ratings{}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil, false
		}
		var dst **int
		switch k {
		case "overall":
			dst = &r.Overall
		case "hook":
			dst = &r.Hook
		case "pacing":
			dst = &r.Pacing
		case "script":
			dst = &r.Script
		case "visuals":
			dst = &r.Visuals
		case "motion":
			dst = &r.Motion
		case "captions":
			dst = &r.Captions
		case "sync":
			dst = &r.Sync
		default:
			return nil, false
		}
		if c, err := d.PeekCode(); err != nil || c == msgpcode.Nil || !(msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)) {
			return nil, false
		}
		v, err := d.DecodeInt()
		if err != nil {
			return nil, false
		}
		*dst = &v
	}
	return r, true
}

func fastStrings(d *msgpack.Decoder) ([]string, bool) {
	if c, err := d.PeekCode(); err != nil || c == msgpcode.Nil {
		return nil, false
	}
	n, err := d.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, false
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = d.DecodeString(); err != nil {
			return nil, false
		}
	}
	return out, true
}

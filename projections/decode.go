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
	if ev.V == 1 {
		switch ev.Type {
		case events.TypeFeedbackSubmitted:
			if p, ok := fastFeedbackSubmitted(ev.Data); ok {
				return p, nil
			}
		case events.TypeExperimentSubmitted:
			if p, ok := fastExperimentSubmitted(ev.Data); ok {
				return p, nil
			}
		case events.TypeRunImported:
			if p, ok := fastRunImported(ev.Data); ok {
				return p, nil
			}
		case events.TypeExperimentCreated, events.TypeExperimentUpdated:
			if x, ok := fastExperimentPayload(ev.Data); ok {
				if ev.Type == events.TypeExperimentCreated {
					return &events.ExperimentCreated{Experiment: *x}, nil
				}
				return &events.ExperimentUpdated{Experiment: *x}, nil
			}
		}
	}
	return ev.Decode()
}

// fastExperimentPayload decodes {"experiment": LabExperiment}.
func fastExperimentPayload(data []byte) (*events.LabExperiment, bool) {
	fd := fastDecPool.Get().(*fastDecoder)
	defer fastDecPool.Put(fd)
	fd.r.Reset(data)
	fd.d.Reset(&fd.r)
	d := fd.d
	n, err := d.DecodeMapLen()
	if err != nil || n != 1 {
		return nil, false
	}
	if k, err := d.DecodeString(); err != nil || k != "experiment" {
		return nil, false
	}
	x := &events.LabExperiment{}
	if !fastExperiment(d, x) || fd.r.Len() != 0 {
		return nil, false
	}
	return x, true
}

func fastExperiment(d *msgpack.Decoder, x *events.LabExperiment) bool {
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
			x.SchemaVersion, err = d.DecodeInt()
		case "experimentId":
			x.ExperimentID, err = d.DecodeString()
		case "sessionId":
			x.SessionID, err = d.DecodeString()
		case "createdAt":
			x.CreatedAt, err = d.DecodeString()
		case "name":
			x.Name, err = d.DecodeString()
		case "hypothesis":
			x.Hypothesis, err = d.DecodeString()
		case "topic":
			x.Topic, err = d.DecodeString()
		case "baselineRunId":
			x.BaselineRunID, err = d.DecodeString()
		case "status":
			x.Status, err = d.DecodeString()
		case "updatedAt":
			x.UpdatedAt, err = d.DecodeString()
		case "variants":
			var m [][3]string
			if m, ok = fastTriples(d, "variantId", "label", "runId"); ok && m != nil {
				x.Variants = make([]events.Variant, len(m))
				for j, t := range m {
					x.Variants[j] = events.Variant{VariantID: t[0], Label: t[1], RunID: t[2]}
				}
			}
		case "questions":
			var m [][3]string
			if m, ok = fastTriples(d, "id", "prompt", "type"); ok && m != nil {
				x.Questions = make([]events.Question, len(m))
				for j, t := range m {
					x.Questions[j] = events.Question{ID: t[0], Prompt: t[1], Type: t[2]}
				}
			}
		case "winner":
			var w [][3]string
			if w, ok = fastTriplesOne(d, "variantId", "reason"); ok && w != nil {
				x.Winner = &events.Winner{VariantID: w[0][0], Reason: w[0][1]}
			}
		case "answers":
			var b []byte
			if b, err = d.DecodeBytes(); err == nil && len(b) > 0 {
				x.Answers = b
			}
		default:
			return false // unknown
		}
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// fastTriples decodes an array of maps with (a subset of) three string
// fields; nil stays nil.
func fastTriples(d *msgpack.Decoder, k0, k1, k2 string) ([][3]string, bool) {
	c, err := d.PeekCode()
	if err != nil {
		return nil, false
	}
	if c == msgpcode.Nil {
		return nil, d.DecodeNil() == nil
	}
	n, err := d.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, false
	}
	out := make([][3]string, n)
	for i := range out {
		m, err := d.DecodeMapLen()
		if err != nil || m < 0 {
			return nil, false
		}
		for j := 0; j < m; j++ {
			k, err := d.DecodeString()
			if err != nil {
				return nil, false
			}
			var idx int
			switch k {
			case k0:
				idx = 0
			case k1:
				idx = 1
			case k2:
				idx = 2
			default:
				return nil, false
			}
			if out[i][idx], err = d.DecodeString(); err != nil {
				return nil, false
			}
		}
	}
	return out, true
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

// fastTriplesOne decodes one map of (a subset of) two string fields as a
// one-element fastTriples result; nil stays nil.
func fastTriplesOne(d *msgpack.Decoder, k0, k1 string) ([][3]string, bool) {
	c, err := d.PeekCode()
	if err != nil || c == msgpcode.Nil {
		return nil, false
	}
	m, err := d.DecodeMapLen()
	if err != nil || m < 0 {
		return nil, false
	}
	out := make([][3]string, 1)
	for j := 0; j < m; j++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil, false
		}
		var idx int
		switch k {
		case k0:
			idx = 0
		case k1:
			idx = 1
		default:
			return nil, false
		}
		if out[0][idx], err = d.DecodeString(); err != nil {
			return nil, false
		}
	}
	return out, true
}

// fastExperimentSubmitted decodes {"experiment": …, "feedback": […]}.
func fastExperimentSubmitted(data []byte) (*events.ExperimentSubmitted, bool) {
	fd := fastDecPool.Get().(*fastDecoder)
	defer fastDecPool.Put(fd)
	fd.r.Reset(data)
	fd.d.Reset(&fd.r)
	d := fd.d
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, false
	}
	p := &events.ExperimentSubmitted{}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil, false
		}
		switch k {
		case "experiment":
			if !fastExperiment(d, &p.Experiment) {
				return nil, false
			}
		case "feedback":
			c, err := d.PeekCode()
			if err != nil || c == msgpcode.Nil {
				return nil, false
			}
			m, err := d.DecodeArrayLen()
			if err != nil || m < 0 {
				return nil, false
			}
			p.Feedback = make([]events.FeedbackEntry, m)
			for j := range p.Feedback {
				if !fastFeedbackEntry(d, &p.Feedback[j]) {
					return nil, false
				}
			}
		default:
			return nil, false
		}
	}
	if fd.r.Len() != 0 {
		return nil, false
	}
	return p, true
}

// fastRunImported decodes {"run": LabRun} when its nested values are the
// common ones (fingerprint, integer metrics); anything else falls back.
func fastRunImported(data []byte) (*events.RunImported, bool) {
	fd := fastDecPool.Get().(*fastDecoder)
	defer fastDecPool.Put(fd)
	fd.r.Reset(data)
	fd.d.Reset(&fd.r)
	d := fd.d
	n, err := d.DecodeMapLen()
	if err != nil || n != 1 {
		return nil, false
	}
	if k, err := d.DecodeString(); err != nil || k != "run" {
		return nil, false
	}
	p := &events.RunImported{}
	r := &p.Run
	if n, err = d.DecodeMapLen(); err != nil || n < 0 {
		return nil, false
	}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil, false
		}
		ok := true
		switch k {
		case "schemaVersion":
			r.SchemaVersion, err = d.DecodeInt()
		case "runId":
			r.RunID, err = d.DecodeString()
		case "sessionId":
			r.SessionID, err = d.DecodeString()
		case "createdAt":
			r.CreatedAt, err = d.DecodeString()
		case "topic":
			r.Topic, err = d.DecodeString()
		case "artifactsDir":
			r.ArtifactsDir, err = d.DecodeString()
		case "artifactsDirRealpath":
			r.ArtifactsDirRealpath, err = d.DecodeString()
		case "supersedesRunId":
			r.SupersedesRunID, err = d.DecodeString()
		case "videoPath":
			r.VideoPath, err = d.DecodeString()
		case "fingerprint":
			r.Fingerprint, ok = fastFingerprint(d)
		case "autoMetricsSummary":
			r.AutoMetricsSummary, ok = fastMetricsSummary(d)
		default:
			return nil, false // reports, unknown
		}
		if err != nil || !ok {
			return nil, false
		}
	}
	if fd.r.Len() != 0 {
		return nil, false
	}
	return p, true
}

func fastFingerprint(d *msgpack.Decoder) (*events.RunFingerprint, bool) {
	if c, err := d.PeekCode(); err != nil || c == msgpcode.Nil {
		return nil, false
	}
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, false
	}
	fp := &events.RunFingerprint{}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil, false
		}
		fs, ok := fastFileStat(d)
		if !ok {
			return nil, false
		}
		switch k {
		case "video":
			fp.Video = fs
		case "script":
			fp.Script = fs
		default:
			return nil, false
		}
	}
	return fp, true
}

func fastFileStat(d *msgpack.Decoder) (*events.FileStat, bool) {
	if c, err := d.PeekCode(); err != nil || c == msgpcode.Nil {
		return nil, false
	}
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, false
	}
	f := &events.FileStat{}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil, false
		}
		switch k {
		case "path":
			f.Path, err = d.DecodeString()
		case "sizeBytes":
			f.SizeBytes, err = d.DecodeInt64()
		case "mtimeMs":
			f.MtimeMs, err = d.DecodeInt64()
		default:
			return nil, false
		}
		if err != nil {
			return nil, false
		}
	}
	return f, true
}

// fastMetricsSummary handles the integer metrics and the label; a float
// metric falls back.
func fastMetricsSummary(d *msgpack.Decoder) (*events.AutoMetricsSummary, bool) {
	if c, err := d.PeekCode(); err != nil || c == msgpcode.Nil {
		return nil, false
	}
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, false
	}
	m := &events.AutoMetricsSummary{}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil, false
		}
		var dst **int
		switch k {
		case "syncRating":
			dst = &m.SyncRating
		case "captionOverall":
			dst = &m.CaptionOverall
		case "proxyScoreOverall":
			dst = &m.ProxyScoreOverall
		case "syncLabel":
			if m.SyncLabel, err = d.DecodeString(); err != nil {
				return nil, false
			}
			continue
		default:
			return nil, false
		}
		c, err := d.PeekCode()
		if err != nil {
			return nil, false
		}
		if c == msgpcode.Nil {
			if d.DecodeNil() != nil {
				return nil, false
			}
			continue
		}
		if !(msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)) {
			return nil, false
		}
		v, err := d.DecodeInt()
		if err != nil {
			return nil, false
		}
		*dst = &v
	}
	return m, true
}

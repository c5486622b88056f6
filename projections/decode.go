package projections

import (
	"bytes"
	"unsafe"

	"github.com/cmlab/cmlab/events"
)

// A fast path for the most common payload of a Lab log, feedback.submitted:
// decoding it field by field instead of through reflection roughly halves
// its cost in a rebuild. Anything it does not expect (an older version, a
// rarely set nested field, an unknown key, a surprising type) makes it
// give up, and the event goes through events.Event.Decode as every other;
// TestFastDecodeMatchesReflective holds the two to the same result.

// mp reads msgpack straight from the payload bytes: no reader, no
// intermediate buffer, strings copied once. Any code it does not expect
// sets bad, and the caller falls back to the reflective decoder. That
// includes a nil (0xc0) wherever a value is read: no reader takes one for
// a map, array, string, binary or integer, so only intPtr(true) and
// fastTriples, which accept a nil, look for it.
type mp struct {
	b   []byte
	i   int
	bad bool
}

func (m *mp) byte1() byte {
	if m.i >= len(m.b) {
		m.bad = true
		return 0
	}
	c := m.b[m.i]
	m.i++
	return c
}

func (m *mp) uint(n int) uint64 {
	if m.i+n > len(m.b) {
		m.bad = true
		return 0
	}
	var v uint64
	for _, c := range m.b[m.i : m.i+n] {
		v = v<<8 | uint64(c)
	}
	m.i += n
	return v
}

func (m *mp) peekNil() bool { return m.i < len(m.b) && m.b[m.i] == 0xc0 }

// mapLen reads a map header.
func (m *mp) mapLen() int {
	c := m.byte1()
	switch {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f)
	case c == 0xde:
		return int(m.uint(2))
	case c == 0xdf:
		return int(m.uint(4))
	}
	m.bad = true
	return 0
}

// arrayLen reads an array header.
func (m *mp) arrayLen() int {
	c := m.byte1()
	switch {
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f)
	case c == 0xdc:
		return int(m.uint(2))
	case c == 0xdd:
		return int(m.uint(4))
	}
	m.bad = true
	return 0
}

// strBytes reads a str value and returns its bytes (not copied).
func (m *mp) strBytes() []byte {
	c := m.byte1()
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9:
		n = int(m.uint(1))
	case c == 0xda:
		n = int(m.uint(2))
	case c == 0xdb:
		n = int(m.uint(4))
	default:
		m.bad = true
		return nil
	}
	if m.bad || n < 0 || m.i+n > len(m.b) {
		m.bad = true
		return nil
	}
	b := m.b[m.i : m.i+n]
	m.i += n
	return b
}

// str reads a str value as a string that shares the payload's bytes (no
// copy, no allocation). This is sound because of how decodePayload is
// used: the payloads it returns live only inside one render call, which
// copies every byte it keeps into the rendered lines, and an event's Data
// is never modified once the event exists (the log and the committer only
// read it).
func (m *mp) str() string {
	b := m.strBytes()
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// binBytes reads a bin value (copied).
func (m *mp) binBytes() []byte {
	c := m.byte1()
	var n int
	switch c {
	case 0xc4:
		n = int(m.uint(1))
	case 0xc5:
		n = int(m.uint(2))
	case 0xc6:
		n = int(m.uint(4))
	default:
		m.bad = true
		return nil
	}
	if m.bad || n < 0 || m.i+n > len(m.b) {
		m.bad = true
		return nil
	}
	b := bytes.Clone(m.b[m.i : m.i+n])
	m.i += n
	return b
}

// int64 reads an integer of any msgpack integer encoding.
func (m *mp) int64() int64 {
	c := m.byte1()
	switch {
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	case c == 0xcc:
		return int64(m.uint(1))
	case c == 0xcd:
		return int64(m.uint(2))
	case c == 0xce:
		return int64(m.uint(4))
	case c == 0xcf:
		v := m.uint(8)
		if v > 1<<63-1 {
			m.bad = true
		}
		return int64(v)
	case c == 0xd0:
		return int64(int8(m.uint(1)))
	case c == 0xd1:
		return int64(int16(m.uint(2)))
	case c == 0xd2:
		return int64(int32(m.uint(4)))
	case c == 0xd3:
		return int64(m.uint(8))
	}
	m.bad = true
	return 0
}

func (m *mp) int() int { return int(m.int64()) }

func (m *mp) done() bool { return !m.bad && m.i == len(m.b) }

// decodePayload is ev.Decode with the fast path. The strings of a payload
// from the fast path share ev.Data (see mp.str): the payload must not
// outlive the render that asked for it.
func decodePayload(ev *events.Event) (events.Payload, error) {
	if ev.V == 1 {
		var p events.Payload
		m := &mp{b: ev.Data}
		// (Each branch assigns only a non-nil pointer: a typed nil in p
		// would not compare equal to nil.)
		switch ev.Type {
		case events.TypeFeedbackSubmitted:
			if x := fastFeedbackSubmitted(m); x != nil {
				p = x
			}
		case events.TypeExperimentSubmitted:
			if x := fastExperimentSubmitted(m); x != nil {
				p = x
			}
		case events.TypeRunImported:
			if x := fastRunImported(m); x != nil {
				p = x
			}
		case events.TypeExperimentCreated:
			if x := fastExperimentPayload(m); x != nil {
				p = &events.ExperimentCreated{Experiment: *x}
			}
		case events.TypeExperimentUpdated:
			if x := fastExperimentPayload(m); x != nil {
				p = &events.ExperimentUpdated{Experiment: *x}
			}
		}
		if p != nil && m.done() {
			return p, nil
		}
	}
	return ev.Decode()
}

// key1 reads a map key and reports whether it is want.
func (m *mp) key1(want string) bool { return string(m.strBytes()) == want && !m.bad }

func fastFeedbackSubmitted(m *mp) *events.FeedbackSubmitted {
	if m.mapLen() != 1 || !m.key1("entry") {
		return nil
	}
	p := &events.FeedbackSubmitted{}
	if !fastFeedbackEntry(m, &p.Entry) {
		return nil
	}
	return p
}

func fastFeedbackEntry(m *mp, e *events.FeedbackEntry) bool {
	n := m.mapLen()
	for i := 0; i < n && !m.bad; i++ {
		switch string(m.strBytes()) {
		case "schemaVersion":
			e.SchemaVersion = m.int()
		case "id":
			e.ID = m.str()
		case "createdAt":
			e.CreatedAt = m.str()
		case "sessionId":
			e.SessionID = m.str()
		case "runId":
			e.RunID = m.str()
		case "experimentId":
			e.ExperimentID = m.str()
		case "variantId":
			e.VariantID = m.str()
		case "topic":
			e.Topic = m.str()
		case "videoPath":
			e.VideoPath = m.str()
		case "artifactsDir":
			e.ArtifactsDir = m.str()
		case "notes":
			e.Notes = m.str()
		case "ratings":
			e.Ratings = fastRatings(m)
		case "tags":
			e.Tags = fastStrings(m)
		default:
			return false // autoMetricsSnapshot, answers, reports, extra, unknown
		}
	}
	return !m.bad
}

// intPtr reads an integer into a new *int; nil is refused (the fields read
// with it omit nil) unless nilOK.
func (m *mp) intPtr(nilOK bool) *int {
	if m.peekNil() {
		m.i++
		if !nilOK {
			m.bad = true
		}
		return nil
	}
	v := m.int()
	return &v
}

func fastRatings(m *mp) *events.Ratings {
	n := m.mapLen()
	// The ratings and their values in one allocation instead of nine.
	x := &struct {
		r events.Ratings
		v [8]int
	}{}
	r := &x.r
	for i := 0; i < n && !m.bad; i++ {
		var dst **int
		var slot int
		switch string(m.strBytes()) {
		case "overall":
			dst, slot = &r.Overall, 0
		case "hook":
			dst, slot = &r.Hook, 1
		case "pacing":
			dst, slot = &r.Pacing, 2
		case "script":
			dst, slot = &r.Script, 3
		case "visuals":
			dst, slot = &r.Visuals, 4
		case "motion":
			dst, slot = &r.Motion, 5
		case "captions":
			dst, slot = &r.Captions, 6
		case "sync":
			dst, slot = &r.Sync, 7
		default:
			m.bad = true
			return r
		}
		x.v[slot] = m.int()
		*dst = &x.v[slot]
	}
	return r
}

func fastStrings(m *mp) []string {
	n := m.arrayLen()
	if m.bad || n > len(m.b) {
		m.bad = true
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = m.str()
	}
	return out
}

func fastExperimentPayload(m *mp) *events.LabExperiment {
	if m.mapLen() != 1 || !m.key1("experiment") {
		return nil
	}
	x := &events.LabExperiment{}
	if !fastExperiment(m, x) {
		return nil
	}
	return x
}

func fastExperiment(m *mp, x *events.LabExperiment) bool {
	n := m.mapLen()
	for i := 0; i < n && !m.bad; i++ {
		switch string(m.strBytes()) {
		case "schemaVersion":
			x.SchemaVersion = m.int()
		case "experimentId":
			x.ExperimentID = m.str()
		case "sessionId":
			x.SessionID = m.str()
		case "createdAt":
			x.CreatedAt = m.str()
		case "name":
			x.Name = m.str()
		case "hypothesis":
			x.Hypothesis = m.str()
		case "topic":
			x.Topic = m.str()
		case "baselineRunId":
			x.BaselineRunID = m.str()
		case "status":
			x.Status = m.str()
		case "updatedAt":
			x.UpdatedAt = m.str()
		case "variants":
			if v, isNil := fastTriples(m, "variantId", "label", "runId", func(f [3]string) events.Variant {
				return events.Variant{VariantID: f[0], Label: f[1], RunID: f[2]}
			}); !isNil {
				x.Variants = v
			}
		case "questions":
			if q, isNil := fastTriples(m, "id", "prompt", "type", func(f [3]string) events.Question {
				return events.Question{ID: f[0], Prompt: f[1], Type: f[2]}
			}); !isNil {
				x.Questions = q
			}
		case "winner":
			w := fastFields(m, "variantId", "reason", "")
			x.Winner = &events.Winner{VariantID: w[0], Reason: w[1]}
		case "answers":
			if b := m.binBytes(); len(b) > 0 {
				x.Answers = b
			}
		case "sparse":
			x.Sparse = m.bool()
		default:
			return false
		}
	}
	return !m.bad
}

// bool reads true or false.
func (m *mp) bool() bool {
	switch m.byte1() {
	case 0xc3:
		return true
	case 0xc2:
		return false
	}
	m.bad = true
	return false
}

// fastFields reads one map of up to three string fields named k0, k1, k2.
func fastFields(m *mp, k0, k1, k2 string) (out [3]string) {
	n := m.mapLen()
	for j := 0; j < n && !m.bad; j++ {
		switch k := string(m.strBytes()); {
		case k == k0:
			out[0] = m.str()
		case k == k1:
			out[1] = m.str()
		case k == k2 && k2 != "":
			out[2] = m.str()
		default:
			m.bad = true
		}
	}
	return out
}

// fastTriples reads an array of fastFields maps, each made a T by mk; a
// nil array reports isNil.
func fastTriples[T any](m *mp, k0, k1, k2 string, mk func([3]string) T) (out []T, isNil bool) {
	if m.peekNil() {
		m.i++
		return nil, true
	}
	n := m.arrayLen()
	if m.bad || n > len(m.b) {
		m.bad = true
		return nil, false
	}
	out = make([]T, n)
	for i := range out {
		out[i] = mk(fastFields(m, k0, k1, k2))
	}
	return out, false
}

func fastExperimentSubmitted(m *mp) *events.ExperimentSubmitted {
	n := m.mapLen()
	p := &events.ExperimentSubmitted{}
	for i := 0; i < n && !m.bad; i++ {
		switch string(m.strBytes()) {
		case "experiment":
			if !fastExperiment(m, &p.Experiment) {
				return nil
			}
		case "feedback":
			k := m.arrayLen()
			if m.bad || k > len(m.b) {
				return nil
			}
			p.Feedback = make([]events.FeedbackEntry, k)
			for j := range p.Feedback {
				if !fastFeedbackEntry(m, &p.Feedback[j]) {
					return nil
				}
			}
		default:
			return nil
		}
	}
	if m.bad {
		return nil
	}
	return p
}

// fastRunImported reads {"run": LabRun} when its nested values are the
// common ones (fingerprint, integer metrics); anything else falls back.
func fastRunImported(m *mp) *events.RunImported {
	if m.mapLen() != 1 || !m.key1("run") {
		return nil
	}
	p := &events.RunImported{}
	r := &p.Run
	n := m.mapLen()
	for i := 0; i < n && !m.bad; i++ {
		switch string(m.strBytes()) {
		case "schemaVersion":
			r.SchemaVersion = m.int()
		case "runId":
			r.RunID = m.str()
		case "sessionId":
			r.SessionID = m.str()
		case "createdAt":
			r.CreatedAt = m.str()
		case "topic":
			r.Topic = m.str()
		case "artifactsDir":
			r.ArtifactsDir = m.str()
		case "artifactsDirRealpath":
			r.ArtifactsDirRealpath = m.str()
		case "supersedesRunId":
			r.SupersedesRunID = m.str()
		case "videoPath":
			r.VideoPath = m.str()
		case "fingerprint":
			r.Fingerprint = fastFingerprint(m)
		case "autoMetricsSummary":
			r.AutoMetricsSummary = fastMetricsSummary(m)
		default:
			return nil // reports, unknown
		}
	}
	if m.bad {
		return nil
	}
	return p
}

func fastFingerprint(m *mp) *events.RunFingerprint {
	n := m.mapLen()
	fp := &events.RunFingerprint{}
	for i := 0; i < n && !m.bad; i++ {
		switch string(m.strBytes()) {
		case "video":
			fp.Video = fastFileStat(m)
		case "script":
			fp.Script = fastFileStat(m)
		default:
			m.bad = true
		}
	}
	return fp
}

func fastFileStat(m *mp) *events.FileStat {
	n := m.mapLen()
	f := &events.FileStat{}
	for i := 0; i < n && !m.bad; i++ {
		switch string(m.strBytes()) {
		case "path":
			f.Path = m.str()
		case "sizeBytes":
			f.SizeBytes = m.int64()
		case "mtimeMs":
			f.MtimeMs = m.int64()
		case "mtimeNs":
			f.MtimeNs = m.int64()
		default:
			m.bad = true
		}
	}
	return f
}

// fastMetricsSummary reads the integer metrics and the label; a float
// metric falls back.
func fastMetricsSummary(m *mp) *events.AutoMetricsSummary {
	n := m.mapLen()
	s := &events.AutoMetricsSummary{}
	for i := 0; i < n && !m.bad; i++ {
		switch string(m.strBytes()) {
		case "syncRating":
			s.SyncRating = m.intPtr(true)
		case "captionOverall":
			s.CaptionOverall = m.intPtr(true)
		case "proxyScoreOverall":
			s.ProxyScoreOverall = m.intPtr(true)
		case "syncLabel":
			s.SyncLabel = m.str()
		default:
			m.bad = true
		}
	}
	return s
}

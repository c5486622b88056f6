package projections

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cmlab/cmlab/events"
)

// Hand-written encoders for the records of the hot Lab views. They produce
// exactly the bytes of encoding/json with HTML escaping off (the test
// TestEncodersMatchEncodingJSON holds them to it) at a fraction of the
// cost, which is what lets a rebuild reach its throughput target. Rarely
// set nested values fall back to encoding/json.

const hexDigits = "0123456789abcdef"

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// needsEscape8 reports whether any of the eight bytes packed in x is not a
// plain ASCII byte appendString copies as is: a control byte (< 0x20),
// '"', '\\' or a byte of a multi-byte sequence (>= 0x80). It may only
// err towards true, which the byte-by-byte path then handles.
func needsEscape8(x uint64) bool {
	q := x ^ (swarLo * '"')
	bs := x ^ (swarLo * '\\')
	return ((x-swarLo*0x20)&^x|(q-swarLo)&^q|(bs-swarLo)&^bs|x)&swarHi != 0
}

// appendString appends s as a JSON string, escaping as encoding/json does
// with SetEscapeHTML(false).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip eight plain bytes at a time (most of a Lab record's text).
		for i+8 <= len(s) && !needsEscape8(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// obj writes the fields of one JSON object.
type obj struct {
	b     []byte
	first bool
	err   error
}

func newObj(dst []byte) *obj { return &obj{b: append(dst, '{'), first: true} }

func (o *obj) key(name string) {
	if o.first {
		o.first = false
	} else {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, '"')
	o.b = append(o.b, name...)
	o.b = append(o.b, '"', ':')
}

func (o *obj) str(name, v string) { o.key(name); o.b = appendString(o.b, v) }

func (o *obj) strOmit(name, v string) {
	if v != "" {
		o.str(name, v)
	}
}

func (o *obj) int(name string, v int64) { o.key(name); o.b = strconv.AppendInt(o.b, v, 10) }

func (o *obj) intPtrOmit(name string, v *int) {
	if v != nil {
		o.int(name, int64(*v))
	}
}

// intPtr writes v or null.
func (o *obj) intPtr(name string, v *int) {
	if v == nil {
		o.key(name)
		o.b = append(o.b, "null"...)
		return
	}
	o.int(name, int64(*v))
}

func (o *obj) strings(name string, v []string, omitEmpty bool) {
	if omitEmpty && len(v) == 0 {
		return
	}
	o.key(name)
	if v == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = append(o.b, '[')
	for i, s := range v {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = appendString(o.b, s)
	}
	o.b = append(o.b, ']')
}

// raw writes a json.RawMessage as encoding/json does: compacted; omitted
// when empty and omitEmpty, null when empty otherwise.
func (o *obj) raw(name string, v json.RawMessage, omitEmpty bool) {
	if len(v) == 0 {
		if omitEmpty {
			return
		}
		o.key(name)
		o.b = append(o.b, "null"...)
		return
	}
	o.key(name)
	buf := bytes.NewBuffer(o.b)
	if err := json.Compact(buf, v); err != nil && o.err == nil {
		o.err = err
	}
	o.b = buf.Bytes()
}

// value writes v with encoding/json (rare nested values).
func (o *obj) value(name string, v any) {
	o.key(name)
	b, err := jsonLine(v)
	if err != nil {
		if o.err == nil {
			o.err = err
		}
		return
	}
	o.b = append(o.b, b[:len(b)-1]...)
}

// end closes the object and, with nl, ends the line.
func (o *obj) end(nl bool) ([]byte, error) {
	o.b = append(o.b, '}')
	if nl {
		o.b = append(o.b, '\n')
	}
	return o.b, o.err
}

func appendRatings(dst []byte, r *events.Ratings) []byte {
	o := newObj(dst)
	o.intPtrOmit("overall", r.Overall)
	o.intPtrOmit("hook", r.Hook)
	o.intPtrOmit("pacing", r.Pacing)
	o.intPtrOmit("script", r.Script)
	o.intPtrOmit("visuals", r.Visuals)
	o.intPtrOmit("motion", r.Motion)
	o.intPtrOmit("captions", r.Captions)
	o.intPtrOmit("sync", r.Sync)
	b, _ := o.end(false)
	return b
}

// appendFeedbackEntry encodes e as one line (with '\n').
func appendFeedbackEntry(dst []byte, e *events.FeedbackEntry) ([]byte, error) {
	o := newObj(dst)
	o.int("schemaVersion", int64(e.SchemaVersion))
	o.str("id", e.ID)
	o.str("createdAt", e.CreatedAt)
	o.strOmit("sessionId", e.SessionID)
	o.strOmit("runId", e.RunID)
	o.strOmit("experimentId", e.ExperimentID)
	o.strOmit("variantId", e.VariantID)
	o.strOmit("topic", e.Topic)
	o.strOmit("videoPath", e.VideoPath)
	o.strOmit("artifactsDir", e.ArtifactsDir)
	if e.Ratings != nil {
		o.key("ratings")
		o.b = appendRatings(o.b, e.Ratings)
	}
	o.strOmit("notes", e.Notes)
	o.strings("tags", e.Tags, true)
	if e.AutoMetricsSnapshot != nil {
		o.value("autoMetricsSnapshot", e.AutoMetricsSnapshot)
	}
	o.raw("answers", e.Answers, true)
	if e.Reports != nil {
		o.value("reports", e.Reports)
	}
	o.raw("extra", e.Extra, true)
	return o.end(true)
}

func appendFileStat(dst []byte, f *events.FileStat) []byte {
	o := newObj(dst)
	o.strOmit("path", f.Path)
	o.int("sizeBytes", f.SizeBytes)
	if f.MtimeNs != 0 {
		// Node's mtimeMs as JSON.stringify prints it (shortest form that
		// reads back to the same double; no exponent below 1e21).
		o.key("mtimeMs")
		o.b = strconv.AppendFloat(o.b, f.NodeMtimeMs(), 'f', -1, 64)
	} else {
		o.int("mtimeMs", f.MtimeMs)
	}
	b, _ := o.end(false)
	return b
}

// appendLabRun encodes r as one line (with '\n').
func appendLabRun(dst []byte, r *events.LabRun) ([]byte, error) {
	o := newObj(dst)
	o.int("schemaVersion", int64(r.SchemaVersion))
	o.str("runId", r.RunID)
	o.str("sessionId", r.SessionID)
	o.str("createdAt", r.CreatedAt)
	o.strOmit("topic", r.Topic)
	o.str("artifactsDir", r.ArtifactsDir)
	o.str("artifactsDirRealpath", r.ArtifactsDirRealpath)
	if fp := r.Fingerprint; fp != nil {
		o.key("fingerprint")
		f := newObj(o.b)
		if fp.Video != nil {
			f.key("video")
			f.b = appendFileStat(f.b, fp.Video)
		}
		if fp.Script != nil {
			f.key("script")
			f.b = appendFileStat(f.b, fp.Script)
		}
		o.b, _ = f.end(false)
	}
	o.strOmit("supersedesRunId", r.SupersedesRunID)
	o.strOmit("videoPath", r.VideoPath)
	if r.Reports != nil {
		o.value("reports", r.Reports)
	}
	if m := r.AutoMetricsSummary; m != nil {
		if m.Read == nil && m.MeanDriftMs == nil && m.MaxDriftMs == nil && m.CaptionCoverageRatio == nil && m.OcrConfidenceMean == nil {
			o.key("autoMetricsSummary")
			s := newObj(o.b)
			s.intPtr("syncRating", m.SyncRating)
			s.strOmit("syncLabel", m.SyncLabel)
			s.intPtr("captionOverall", m.CaptionOverall)
			s.intPtr("proxyScoreOverall", m.ProxyScoreOverall)
			o.b, _ = s.end(false)
		} else {
			o.value("autoMetricsSummary", m)
		}
	}
	return o.end(true)
}

// appendLabExperiment encodes x as one line (with '\n').
func appendLabExperiment(dst []byte, x *events.LabExperiment) ([]byte, error) {
	o := newObj(dst)
	o.int("schemaVersion", int64(x.SchemaVersion))
	o.str("experimentId", x.ExperimentID)
	o.str("sessionId", x.SessionID)
	o.str("createdAt", x.CreatedAt)
	o.str("name", x.Name)
	if x.Sparse {
		o.strOmit("hypothesis", x.Hypothesis)
		o.strOmit("topic", x.Topic)
	} else {
		o.str("hypothesis", x.Hypothesis)
		o.str("topic", x.Topic)
	}
	o.str("baselineRunId", x.BaselineRunID)
	o.key("variants")
	if x.Variants == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i := range x.Variants {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			v := newObj(o.b)
			v.str("variantId", x.Variants[i].VariantID)
			v.str("label", x.Variants[i].Label)
			v.str("runId", x.Variants[i].RunID)
			o.b, _ = v.end(false)
		}
		o.b = append(o.b, ']')
	}
	o.str("status", x.Status)
	if x.Winner != nil {
		o.key("winner")
		w := newObj(o.b)
		w.str("variantId", x.Winner.VariantID)
		if x.Sparse {
			w.strOmit("reason", x.Winner.Reason)
		} else {
			w.str("reason", x.Winner.Reason)
		}
		o.b, _ = w.end(false)
	}
	if x.Questions == nil && x.Sparse {
		// omitted, as content-machine omits questions nobody sent
	} else if o.key("questions"); x.Questions == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i := range x.Questions {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			q := newObj(o.b)
			q.str("id", x.Questions[i].ID)
			q.str("prompt", x.Questions[i].Prompt)
			q.str("type", x.Questions[i].Type)
			o.b, _ = q.end(false)
		}
		o.b = append(o.b, ']')
	}
	o.raw("answers", x.Answers, true)
	o.strOmit("updatedAt", x.UpdatedAt)
	return o.end(true)
}

// appendIdempotencyLine encodes l as one line (with '\n').
func appendIdempotencyLine(dst []byte, l *IdempotencyLine) ([]byte, error) {
	o := newObj(dst)
	o.str("requestId", l.RequestID)
	o.str("type", l.Type)
	o.str("entityId", l.EntityID)
	o.str("createdAt", l.CreatedAt)
	o.raw("response", l.Response, true)
	return o.end(true)
}

// appendSessionEventLine encodes l as one line (with '\n'); l.Data must be
// compact JSON already (it is embedded as is).
func appendSessionEventLine(dst []byte, l *SessionEventLine) []byte {
	o := newObj(dst)
	o.int("seq", int64(l.Seq))
	o.str("id", l.ID)
	o.str("type", l.Type)
	o.str("createdAt", l.CreatedAt)
	o.strOmit("requestId", l.RequestID)
	o.key("data")
	o.b = append(o.b, l.Data...)
	b, _ := o.end(true)
	return b
}

// isoTime is events.FormatISO without time.Format's layout parsing (it
// runs for every event of a rebuild); TestISOTimeMatchesEvents holds the
// two together.
func isoTime(ms int64) string {
	var year, month, day, hour, minute, sec, milli int
	if ms >= 0 && ms < 253402300800000 { // 1970 to the end of 9999
		// Civil date from days since 1970-01-01 (H. Hinnant's algorithm,
		// for non-negative days), without time.Time's general machinery.
		days, rem := ms/86400000, int(ms%86400000)
		hour, rem = rem/3600000, rem%3600000
		minute, rem = rem/60000, rem%60000
		sec, milli = rem/1000, rem%1000
		z := days + 719468
		era := z / 146097
		doe := z - era*146097
		yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
		doy := doe - (365*yoe + yoe/4 - yoe/100)
		mp := (5*doy + 2) / 153
		day = int(doy - (153*mp+2)/5 + 1)
		month = int(mp + 3)
		if month > 12 {
			month -= 12
		}
		year = int(yoe + era*400)
		if month <= 2 {
			year++
		}
	} else {
		t := time.UnixMilli(ms).UTC()
		var mon time.Month
		year, mon, day = t.Date()
		if year < 0 || year > 9999 {
			return events.FormatISO(ms)
		}
		month = int(mon)
		hour, minute, sec = t.Clock()
		milli = t.Nanosecond() / 1e6
	}
	var b [24]byte
	put := func(i, v, n int) {
		for j := i + n - 1; j >= i; j-- {
			b[j] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, year, 4)
	b[4] = '-'
	put(5, month, 2)
	b[7] = '-'
	put(8, day, 2)
	b[10] = 'T'
	put(11, hour, 2)
	b[13] = ':'
	put(14, minute, 2)
	b[16] = ':'
	put(17, sec, 2)
	b[19] = '.'
	put(20, milli, 3)
	b[23] = 'Z'
	return string(b[:])
}

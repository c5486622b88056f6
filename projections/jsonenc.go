package projections

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/cmlab/cmlab/events"
)

// Encoders for the records of the hot Lab views, without reflection at
// encoding time: each record is written through a table of its fields
// derived once from its Go type (jsonFieldsOf). They produce exactly the
// bytes of encoding/json with HTML escaping off (the test
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

// appendFeedbackEntry encodes e as one line (with '\n').
func appendFeedbackEntry(dst []byte, e *events.FeedbackEntry) ([]byte, error) {
	return appendRecord(dst, unsafe.Pointer(e), feedbackEntryJSON)
}

// appendLabRun encodes r as one line (with '\n').
func appendLabRun(dst []byte, r *events.LabRun) ([]byte, error) {
	return appendRecord(dst, unsafe.Pointer(r), labRunJSON)
}

// appendLabExperiment encodes x as one line (with '\n'), in its shape
// (events.LabExperiment.Sparse).
func appendLabExperiment(dst []byte, x *events.LabExperiment) ([]byte, error) {
	if x.Sparse {
		return appendRecord(dst, unsafe.Pointer(x), sparseExperimentJSON)
	}
	return appendRecord(dst, unsafe.Pointer(x), experimentJSON)
}

// appendIdempotencyLine encodes l as one line (with '\n').
func appendIdempotencyLine(dst []byte, l *IdempotencyLine) ([]byte, error) {
	return appendRecord(dst, unsafe.Pointer(l), idempotencyLineJSON)
}

// appendSessionEventLine encodes l as one line (with '\n'); l.Data must be
// compact JSON already (it is embedded as is).
func appendSessionEventLine(dst []byte, l *SessionEventLine) []byte {
	b, _ := appendRecord(dst, unsafe.Pointer(l), sessionEventLineJSON)
	return b
}

// The records the encoders write, each a table of its JSON fields derived
// from its Go type (jsonFieldsOf): encoding/json's keys, order and
// omitempty, nested records by their own tables, and the fields whose
// JSON follows a rule of its own named with it.
var (
	feedbackEntryJSON = jsonFieldsOf(reflect.TypeFor[events.FeedbackEntry](), nil)
	labRunJSON        = jsonFieldsOf(reflect.TypeFor[events.LabRun](), jsonRules{
		"fingerprint": {sub: jsonFieldsOf(reflect.TypeFor[events.RunFingerprint](), jsonRules{
			"video":  {kind: jsonFileStat},
			"script": {kind: jsonFileStat},
		})},
		"autoMetricsSummary": {kind: jsonMetricsSummary},
	})
	// LabExperiment's own MarshalJSON: Sparse is never written; a sparse
	// record omits an empty hypothesis, topic and winner reason and
	// questions nobody sent.
	experimentJSON       = jsonFieldsOf(reflect.TypeFor[events.LabExperiment](), jsonRules{"sparse": {kind: jsonSkip}})
	sparseExperimentJSON = jsonFieldsOf(reflect.TypeFor[events.LabExperiment](), jsonRules{
		"sparse":     {kind: jsonSkip},
		"hypothesis": {omit: omitEmpty},
		"topic":      {omit: omitEmpty},
		"winner":     {sub: jsonFieldsOf(reflect.TypeFor[events.Winner](), jsonRules{"reason": {omit: omitEmpty}})},
		"questions":  {omit: omitNil},
	})
	idempotencyLineJSON  = jsonFieldsOf(reflect.TypeFor[IdempotencyLine](), nil)
	sessionEventLineJSON = jsonFieldsOf(reflect.TypeFor[SessionEventLine](), jsonRules{"data": {kind: jsonVerbatim}})
)

// jsonKind is how a field is written.
type jsonKind uint8

const (
	jsonByType jsonKind = iota // (a rule's: the kind of the field's type)
	jsonSkip                   // never written
	jsonString
	jsonInt
	jsonInt64
	jsonUint64
	jsonBool
	jsonIntPtr
	jsonStrings
	jsonRaw      // json.RawMessage, compacted
	jsonVerbatim // json.RawMessage written as it is
	jsonRecordPtr
	jsonRecords
	jsonFileStat       // *events.FileStat (appendFileStat)
	jsonMetricsSummary // *events.AutoMetricsSummary (appendMetricsSummary)
	jsonValue          // a pointer written by encoding/json (its MarshalJSON)
)

// omitRule is when a field is left out.
type omitRule uint8

const (
	omitByTag omitRule = iota // (a rule's: as the field's tag says)
	omitNever
	omitEmpty // encoding/json's omitempty
	omitNil   // a nil slice only
)

var jsonKinds = map[reflect.Type]jsonKind{
	reflect.TypeFor[string]():          jsonString,
	reflect.TypeFor[int]():             jsonInt,
	reflect.TypeFor[int64]():           jsonInt64,
	reflect.TypeFor[uint64]():          jsonUint64,
	reflect.TypeFor[bool]():            jsonBool,
	reflect.TypeFor[*int]():            jsonIntPtr,
	reflect.TypeFor[[]string]():        jsonStrings,
	reflect.TypeFor[json.RawMessage](): jsonRaw,
}

// jsonField is one field of a record's JSON.
type jsonField struct {
	key  string
	off  uintptr
	kind jsonKind
	omit omitRule
	sub  []jsonField  // jsonRecordPtr, jsonRecords: the nested record's fields
	size uintptr      // jsonRecords: one record's size
	typ  reflect.Type // jsonValue
}

// jsonRules are the fields of a record written other than their type and
// tag say, by key: a kind, an omit rule or the nested record's table.
type jsonRules map[string]jsonField

var marshaler = reflect.TypeFor[json.Marshaler]()

// jsonFieldsOf is the table of t's JSON fields. A pointer to or a slice
// of a struct without a MarshalJSON is a nested record with its own
// table; any other pointer goes to encoding/json. A type it cannot write
// otherwise, or a rule for a key t lacks, is a mistake of this file.
func jsonFieldsOf(t reflect.Type, rules jsonRules) []jsonField {
	var fs []jsonField
	for _, sf := range reflect.VisibleFields(t) {
		key, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if key == "" {
			key = sf.Name
		}
		if !sf.IsExported() || sf.Anonymous || key == "-" {
			continue
		}
		f := rules[key]
		f.key, f.off = key, sf.Offset
		if f.omit == omitByTag {
			f.omit = omitNever
			if opts == "omitempty" {
				f.omit = omitEmpty
			}
		}
		if f.kind == jsonByType {
			f.kind = jsonKinds[sf.Type]
		}
		if f.kind == jsonByType {
			switch ft := sf.Type; {
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct && !ft.Implements(marshaler):
				f.kind = jsonRecordPtr
				if f.sub == nil {
					f.sub = jsonFieldsOf(ft.Elem(), nil)
				}
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && !ft.Elem().Implements(marshaler):
				f.kind, f.size = jsonRecords, ft.Elem().Size()
				if f.sub == nil {
					f.sub = jsonFieldsOf(ft.Elem(), nil)
				}
			case ft.Kind() == reflect.Pointer:
				f.kind, f.typ = jsonValue, ft
			default:
				panic("projections: no JSON encoding for " + t.String() + "." + sf.Name)
			}
		}
		fs = append(fs, f)
	}
	for key := range rules {
		if !slices.ContainsFunc(fs, func(f jsonField) bool { return f.key == key }) {
			panic("projections: " + t.String() + " has no field " + key)
		}
	}
	return fs
}

// appendRecord encodes the record at rec, whose fields are fs, as one line
// (with '\n').
func appendRecord(dst []byte, rec unsafe.Pointer, fs []jsonField) ([]byte, error) {
	o := obj{b: append(dst, '{'), first: true}
	o.fields(rec, fs)
	return o.end(true)
}

// object writes the record at rec as a nested object.
func (o *obj) object(rec unsafe.Pointer, fs []jsonField) {
	o.b = append(o.b, '{')
	o.first = true
	o.fields(rec, fs)
	o.b = append(o.b, '}')
	o.first = false
}

// sliceOf is the layout of a Go slice, read here for a slice of any
// nested record.
type sliceOf struct {
	data   unsafe.Pointer
	n, cap int
}

// fields writes the fields fs of the record at rec.
func (o *obj) fields(rec unsafe.Pointer, fs []jsonField) {
	for i := range fs {
		f := &fs[i]
		p := unsafe.Add(rec, f.off)
		switch f.kind {
		case jsonString:
			if v := *(*string)(p); v != "" || f.omit != omitEmpty {
				o.str(f.key, v)
			}
		case jsonInt:
			if v := *(*int)(p); v != 0 || f.omit != omitEmpty {
				o.int(f.key, int64(v))
			}
		case jsonInt64:
			if v := *(*int64)(p); v != 0 || f.omit != omitEmpty {
				o.int(f.key, v)
			}
		case jsonUint64:
			if v := *(*uint64)(p); v != 0 || f.omit != omitEmpty {
				o.key(f.key)
				o.b = strconv.AppendUint(o.b, v, 10)
			}
		case jsonBool:
			if v := *(*bool)(p); v || f.omit != omitEmpty {
				o.key(f.key)
				o.b = strconv.AppendBool(o.b, v)
			}
		case jsonIntPtr:
			if v := *(**int)(p); v != nil || f.omit != omitEmpty {
				o.intPtr(f.key, v)
			}
		case jsonStrings:
			o.strings(f.key, *(*[]string)(p), f.omit == omitEmpty)
		case jsonRaw:
			o.raw(f.key, *(*json.RawMessage)(p), f.omit == omitEmpty)
		case jsonVerbatim:
			o.key(f.key)
			o.b = append(o.b, *(*json.RawMessage)(p)...)
		case jsonRecordPtr:
			if x := *(*unsafe.Pointer)(p); x != nil {
				o.key(f.key)
				o.object(x, f.sub)
			} else if f.omit != omitEmpty {
				o.null(f.key)
			}
		case jsonRecords:
			o.records(f, (*sliceOf)(p))
		case jsonFileStat:
			if v := *(**events.FileStat)(p); v != nil {
				o.key(f.key)
				o.b = appendFileStat(o.b, v)
			} else if f.omit != omitEmpty {
				o.null(f.key)
			}
		case jsonMetricsSummary:
			if v := *(**events.AutoMetricsSummary)(p); v != nil {
				o.metricsSummary(f.key, v)
			} else if f.omit != omitEmpty {
				o.null(f.key)
			}
		case jsonValue:
			// The pointer is read out of the record first: reflect then
			// sees only what it points to, and the record can stay on
			// its caller's stack.
			if x := *(*unsafe.Pointer)(p); x != nil {
				o.value(f.key, reflect.NewAt(f.typ.Elem(), x).Interface())
			} else if f.omit != omitEmpty {
				o.null(f.key)
			}
		}
	}
}

// records writes the slice s of field f's nested records.
func (o *obj) records(f *jsonField, s *sliceOf) {
	switch {
	case f.omit == omitEmpty && s.n == 0, f.omit == omitNil && s.data == nil:
		return
	case s.data == nil:
		o.null(f.key)
		return
	}
	o.key(f.key)
	o.b = append(o.b, '[')
	for i := range s.n {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.object(unsafe.Add(s.data, uintptr(i)*f.size), f.sub)
	}
	o.b = append(o.b, ']')
}

func (o *obj) null(name string) {
	o.key(name)
	o.b = append(o.b, "null"...)
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

// metricsSummary writes m as its MarshalJSON does, by hand in the common
// case (no report read, integer metrics only).
func (o *obj) metricsSummary(name string, m *events.AutoMetricsSummary) {
	if m.Read != nil || m.MeanDriftMs != nil || m.MaxDriftMs != nil || m.CaptionCoverageRatio != nil || m.OcrConfidenceMean != nil {
		o.value(name, m)
		return
	}
	o.key(name)
	o.b = append(o.b, '{')
	o.first = true
	o.intPtr("syncRating", m.SyncRating)
	o.strOmit("syncLabel", m.SyncLabel)
	o.intPtr("captionOverall", m.CaptionOverall)
	o.intPtr("proxyScoreOverall", m.ProxyScoreOverall)
	o.b = append(o.b, '}')
	o.first = false
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
	// 2006-01-02T15:04:05.000Z: the separators fixed, each number's
	// digits at their offset.
	b := [24]byte{4: '-', 7: '-', 10: 'T', 13: ':', 16: ':', 19: '.', 23: 'Z'}
	for _, d := range [...]struct{ at, v, n int }{
		{0, year, 4}, {5, month, 2}, {8, day, 2}, {11, hour, 2}, {14, minute, 2}, {17, sec, 2}, {20, milli, 3},
	} {
		for j := d.at + d.n - 1; j >= d.at; j-- {
			b[j] = byte('0' + d.v%10)
			d.v /= 10
		}
	}
	return string(b[:])
}

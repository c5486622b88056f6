package projections

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/cmlab/cmlab/events"
)

// A fast path for the most common payloads of a Lab log (feedback.submitted
// above all): decoding them field by field, through a table of each
// record's keys derived once from its type, instead of through reflection
// roughly halves their cost in a rebuild. Anything it does not expect (an older version, a
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

// header reads the length in a map, array, str or bin header: its fix
// form (the code's bits outside mask are fix; mask 0: there is none), else
// one of the consecutive codes from wide on, with a length of 1, 2 or 4
// bytes (has8), or of 2 or 4 (maps and arrays, which have no 8-bit form).
func (m *mp) header(fix, mask, wide byte, has8 bool) int {
	c := m.byte1()
	if mask != 0 && c&^mask == fix {
		return int(c & mask)
	}
	last, size := wide+2, 1
	if !has8 {
		last, size = wide+1, 2
	}
	if c < wide || c > last {
		m.bad = true
		return 0
	}
	return int(m.uint(size << (c - wide)))
}

func (m *mp) mapLen() int { return m.header(0x80, 0x0f, 0xde, false) }

func (m *mp) arrayLen() int { return m.header(0x90, 0x0f, 0xdc, false) }

// span reads the next n bytes (not copied).
func (m *mp) span(n int) []byte {
	if m.bad || n < 0 || m.i+n > len(m.b) {
		m.bad = true
		return nil
	}
	b := m.b[m.i : m.i+n]
	m.i += n
	return b
}

// strBytes reads a str value and returns its bytes (not copied).
func (m *mp) strBytes() []byte { return m.span(m.header(0xa0, 0x1f, 0xd9, true)) }

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
func (m *mp) binBytes() []byte { return bytes.Clone(m.span(m.header(0, 0, 0xc4, true))) }

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

// DecodePayload is ev.Decode with the fast path, for the Lab store's build
// (package labapi), which reads the same payloads. The strings of a
// payload from the fast path share ev.Data (see mp.str): they stay valid
// as long as the payload is kept (an event's Data is never modified), and
// keep ev.Data alive that long.
func DecodePayload(ev *events.Event) (events.Payload, error) { return decodePayload(ev) }

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

func fastFeedbackSubmitted(m *mp) *events.FeedbackSubmitted {
	return fastRecord[events.FeedbackSubmitted](m, feedbackSubmittedFields)
}

func fastExperimentSubmitted(m *mp) *events.ExperimentSubmitted {
	return fastRecord[events.ExperimentSubmitted](m, experimentSubmittedFields)
}

func fastRunImported(m *mp) *events.RunImported {
	return fastRecord[events.RunImported](m, runImportedFields)
}

// fastExperimentPayload reads {"experiment": LabExperiment}, the payload
// of experiment.created and experiment.updated alike.
func fastExperimentPayload(m *mp) *events.LabExperiment {
	if x := fastRecord[events.ExperimentCreated](m, experimentCreatedFields); x != nil {
		return &x.Experiment
	}
	return nil
}

// The records the fast path reads, each a table of its keys derived from
// its Go type (fieldsOf): the fields of a kind mp reads exactly as the
// reflective decoder would, plus the nested values named with their
// reading. A key of any other field (a float metric, reports, answers of a
// feedback entry, extra) is in no table, so the record falls back.
var (
	feedbackSubmittedFields   = fieldsOf[events.FeedbackSubmitted](nested{"entry": record(&feedbackEntryFields)})
	experimentCreatedFields   = fieldsOf[events.ExperimentCreated](nested{"experiment": record(&experimentFields)})
	experimentSubmittedFields = fieldsOf[events.ExperimentSubmitted](nested{
		"experiment": record(&experimentFields),
		"feedback":   records[events.FeedbackEntry](&feedbackEntryFields, false),
	})
	runImportedFields   = fieldsOf[events.RunImported](nested{"run": record(&runFields)})
	feedbackEntryFields = fieldsOf[events.FeedbackEntry](nested{
		"ratings": {kind: kindRatings},
		"tags":    {kind: kindStrings},
	})
	experimentFields = fieldsOf[events.LabExperiment](nested{
		"variants":  records[events.Variant](&variantFields, true),
		"questions": records[events.Question](&questionFields, true),
		"winner":    recordPtr[events.Winner](&winnerFields),
		"answers":   {kind: kindAnswers},
	})
	ratingFields   = fieldsOf[events.Ratings](nil) // fastRatings: every field an *int
	variantFields  = fieldsOf[events.Variant](nil)
	questionFields = fieldsOf[events.Question](nil)
	winnerFields   = fieldsOf[events.Winner](nil)
	// A run's nested values are read when they are the common ones
	// (fingerprint, integer metrics); a float metric falls back.
	runFields = fieldsOf[events.LabRun](nested{
		"fingerprint":        recordPtr[events.RunFingerprint](&fingerprintFields),
		"autoMetricsSummary": recordPtr[events.AutoMetricsSummary](&metricsSummaryFields),
	})
	fingerprintFields = fieldsOf[events.RunFingerprint](nested{
		"video":  recordPtr[events.FileStat](&fileStatFields),
		"script": recordPtr[events.FileStat](&fileStatFields),
	})
	fileStatFields       = fieldsOf[events.FileStat](nil)
	metricsSummaryFields = fieldsOf[events.AutoMetricsSummary](nil)
)

// fieldKind is how mp reads a field.
type fieldKind uint8

const (
	kindSkip fieldKind = iota // not read: its key makes the record fall back
	kindString
	kindInt
	kindInt64
	kindBool
	kindIntOrNil // *int; a nil (which the fields read with it carry for "unknown") too
	kindRatings  // *events.Ratings (fastRatings)
	kindStrings  // []string
	kindAnswers  // json.RawMessage from a bin, left nil when empty
	kindRecord   // a nested record (sub)
	kindRecordPtr
	kindRecords // a slice of records (sub); nil too when nilOK
)

var plainKinds = map[reflect.Type]fieldKind{
	reflect.TypeFor[string](): kindString,
	reflect.TypeFor[int]():    kindInt,
	reflect.TypeFor[int64]():  kindInt64,
	reflect.TypeFor[bool]():   kindBool,
	reflect.TypeFor[*int]():   kindIntOrNil,
}

// fastField is one key of a record: where its value goes and how it is
// read. (Nested records are read through tables and allocators, never a
// function that takes the reader: the reader then stays on the stack.)
type fastField struct {
	key  string
	off  uintptr
	kind fieldKind
	sub  *[]fastField
	// alloc makes n records of the nested type at the field at p (a
	// pointer for kindRecordPtr, a slice for kindRecords) and returns the
	// first; size is one record's.
	alloc func(p unsafe.Pointer, n int) unsafe.Pointer
	size  uintptr
	nilOK bool
}

// nested are the fields of a record read other than by their plain kind,
// by key (key and off are filled by fieldsOf).
type nested map[string]fastField

// fieldsOf is the table of T's keys the fast path reads, in T's order (the
// order the encoder writes them in): its fields of a plain kind and those
// nested. A name in nested that T lacks is a mistake of this file.
func fieldsOf[T any](nest nested) []fastField {
	var fs []fastField
	for _, sf := range reflect.VisibleFields(reflect.TypeFor[T]()) {
		key, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if key == "" {
			key = sf.Name
		}
		if !sf.IsExported() || sf.Anonymous || key == "-" {
			continue
		}
		f, ok := nest[key]
		if !ok {
			f.kind = plainKinds[sf.Type]
		}
		if f.kind == kindSkip {
			continue
		}
		f.key, f.off = key, sf.Offset
		fs = append(fs, f)
	}
	for key := range nest {
		if !slices.ContainsFunc(fs, func(f fastField) bool { return f.key == key }) {
			panic("projections: " + reflect.TypeFor[T]().String() + " has no field " + key)
		}
	}
	return fs
}

// record reads a nested record in place. (Tables are referred to by
// pointer: they refer to each other.)
func record(fs *[]fastField) fastField { return fastField{kind: kindRecord, sub: fs} }

// recordPtr reads a nested record into a new T; nil is refused.
func recordPtr[T any](fs *[]fastField) fastField {
	return fastField{kind: kindRecordPtr, sub: fs, alloc: func(p unsafe.Pointer, _ int) unsafe.Pointer {
		x := new(T)
		*(**T)(p) = x
		return unsafe.Pointer(x)
	}}
}

// records reads an array of records; a nil array leaves the field nil
// when nilOK and is refused otherwise.
func records[T any](fs *[]fastField, nilOK bool) fastField {
	return fastField{kind: kindRecords, sub: fs, nilOK: nilOK, size: unsafe.Sizeof(*new(T)),
		alloc: func(p unsafe.Pointer, n int) unsafe.Pointer {
			out := make([]T, n)
			*(*[]T)(p) = out
			return unsafe.Pointer(unsafe.SliceData(out))
		}}
}

// field reads a key and returns its field in fs (nil and bad for a key
// not in fs). Keys come in the table's order unless the encoder was
// another, so the search starts at *next, after the last key found.
func (m *mp) field(fs []fastField, next *int) *fastField {
	k := m.strBytes()
	if m.bad {
		return nil
	}
	at := *next
	for range fs {
		if at >= len(fs) {
			at = 0
		}
		if fs[at].key == string(k) {
			*next = at + 1
			return &fs[at]
		}
		at++
	}
	m.bad = true
	return nil
}

// record reads a map of fs's keys into the record at rec.
func (m *mp) record(rec unsafe.Pointer, fs []fastField) {
	n := m.mapLen()
	next := 0
	for i := 0; i < n && !m.bad; i++ {
		f := m.field(fs, &next)
		if f == nil {
			return
		}
		p := unsafe.Add(rec, f.off)
		switch f.kind {
		case kindString:
			*(*string)(p) = m.str()
		case kindInt:
			*(*int)(p) = m.int()
		case kindInt64:
			*(*int64)(p) = m.int64()
		case kindBool:
			*(*bool)(p) = m.bool()
		case kindIntOrNil:
			*(**int)(p) = m.intPtr(true)
		case kindRatings:
			*(**events.Ratings)(p) = fastRatings(m)
		case kindStrings:
			*(*[]string)(p) = fastStrings(m)
		case kindAnswers:
			if b := m.binBytes(); len(b) > 0 {
				*(*json.RawMessage)(p) = b
			}
		case kindRecord:
			m.record(p, *f.sub)
		case kindRecordPtr:
			m.record(f.alloc(p, 1), *f.sub)
		case kindRecords:
			m.records(p, f)
		}
	}
}

// records reads the array of records of field f into the slice at p.
func (m *mp) records(p unsafe.Pointer, f *fastField) {
	if f.nilOK && m.peekNil() {
		m.i++
		return
	}
	n := m.arrayLen()
	if m.bad || n > len(m.b) {
		m.bad = true
		return
	}
	first := f.alloc(p, n)
	for i := range n {
		m.record(unsafe.Add(first, uintptr(i)*f.size), *f.sub)
	}
}

// fastRecord reads a T whose keys fs lists; nil when anything surprised.
func fastRecord[T any](m *mp, fs []fastField) *T {
	x := new(T)
	m.record(unsafe.Pointer(x), fs)
	if m.bad {
		return nil
	}
	return x
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

// fastRatings reads the ratings and their values in one allocation
// instead of nine; a nil value is refused (the encoder omits nil ones).
func fastRatings(m *mp) *events.Ratings {
	n := m.mapLen()
	x := &struct {
		r events.Ratings
		v [unsafe.Sizeof(events.Ratings{}) / unsafe.Sizeof((*int)(nil))]int // one per field
	}{}
	next := 0
	for i := 0; i < n && !m.bad; i++ {
		f := m.field(ratingFields, &next)
		if f == nil {
			break
		}
		v := &x.v[f.off/unsafe.Sizeof((*int)(nil))]
		*v = m.int()
		*(**int)(unsafe.Add(unsafe.Pointer(&x.r), f.off)) = v
	}
	return &x.r
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

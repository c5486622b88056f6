package events

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// The envelope's byte codec: the one place that writes and reads an
// envelope's bytes. EncodeEnvelope and DecodeEnvelope go through msgpack's
// reflection; AppendEnvelope and DecodeEnvelopeFast take the hand-written
// paths below when Event has the layout they know (checked once, at init),
// producing and accepting exactly the library's bytes. The log (package
// wal) frames these bytes (version, CRC32C) and patches the seq, the
// envelope's first field, in place.

// AppendEnvelope appends the envelope of ev to b: exactly the bytes of
// EncodeEnvelope. ev.Data must be one complete msgpack value (CheckData).
func AppendEnvelope(b []byte, ev *Event) ([]byte, error) {
	if envelopeFast {
		return appendEnvelopeFast(b, ev), nil
	}
	env, err := EncodeEnvelope(ev)
	if err != nil {
		return b, err
	}
	return append(b, env...), nil
}

// EnvelopeBound is at least the bytes AppendEnvelope appends for ev (to
// grow a buffer once).
func EnvelopeBound(ev *Event) int {
	return 96 + len(ev.ID) + len(ev.Type) + len(ev.Stream) + len(ev.Req) + len(ev.ReqHash) + len(ev.Resp) + len(ev.Data)
}

// DecodeEnvelopeFast is DecodeEnvelope (the same event, the same
// refusals) by the hand-written decoder when b has the canonical layout
// AppendEnvelope writes, without reflection; other layouts, and the
// wording of an envelope lacking type, version or id, are left to
// DecodeEnvelope. The log's readers use it.
func DecodeEnvelopeFast(b []byte) (*Event, error) {
	ev, ok := decodeEnvelopeFast(b)
	if ok && (ev.Type == "" || ev.V < 1 || ev.ID == "") {
		ok = false
	}
	if ok {
		return ev, nil
	}
	return DecodeEnvelope(b)
}

// The committer's hot path encodes envelopes by hand instead of through
// msgpack's reflection (four times faster), producing exactly the bytes of
// EncodeEnvelope: a fixmap of the non-empty fields in declaration
// order, seq as a fixed-width uint64, v as msgpack's compact int, ts as a
// fixed-width int64, strings as str, resp as bin, data as its raw bytes.
// envelopeFields is the layout this relies on; Open checks it against
// Event by reflection and falls back to the library on a mismatch,
// and the tests and FuzzEnvelope compare both encoders byte for byte.
// envelopeFast is fixed at init: the layout of a compiled type cannot change.
var envelopeFast = envelopeLayoutKnown()

var envelopeFields = [...]string{"seq", "v", "id", "type", "ts", "stream", "req,omitempty", "rh,omitempty", "resp,omitempty", "data"}

// envelopeLayoutKnown reports whether Event still has the fields
// appendEnvelopeFast writes.
func envelopeLayoutKnown() bool {
	t := reflect.TypeOf(Event{})
	if t.NumField() != len(envelopeFields) {
		return false
	}
	kinds := [...]reflect.Kind{reflect.Uint64, reflect.Int, reflect.String, reflect.String, reflect.Int64, reflect.String, reflect.String, reflect.String, reflect.Slice, reflect.Slice}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("json") != envelopeFields[i] || f.Type.Kind() != kinds[i] {
			return false
		}
	}
	return true
}

// appendEnvelope appends the msgpack envelope of ev to b. ev.Data must be
// one complete msgpack value (CheckData).
func appendEnvelopeFast(b []byte, ev *Event) []byte {
	n := 7
	if ev.Req != "" {
		n++
	}
	if ev.ReqHash != "" {
		n++
	}
	if len(ev.Resp) > 0 {
		n++
	}
	b = append(b, 0x80|byte(n))
	b = append(b, 0xa3, 's', 'e', 'q', 0xcf)
	b = binary.BigEndian.AppendUint64(b, ev.Seq)
	b = append(b, 0xa1, 'v')
	b = appendMsgpackInt(b, int64(ev.V))
	b = append(b, 0xa2, 'i', 'd')
	b = appendMsgpackStr(b, ev.ID)
	b = append(b, 0xa4, 't', 'y', 'p', 'e')
	b = appendMsgpackStr(b, ev.Type)
	b = append(b, 0xa2, 't', 's', 0xd3)
	b = binary.BigEndian.AppendUint64(b, uint64(ev.TS))
	b = append(b, 0xa6, 's', 't', 'r', 'e', 'a', 'm')
	b = appendMsgpackStr(b, ev.Stream)
	if ev.Req != "" {
		b = append(b, 0xa3, 'r', 'e', 'q')
		b = appendMsgpackStr(b, ev.Req)
	}
	if ev.ReqHash != "" {
		b = append(b, 0xa2, 'r', 'h')
		b = appendMsgpackStr(b, ev.ReqHash)
	}
	if len(ev.Resp) > 0 {
		b = append(b, 0xa4, 'r', 'e', 's', 'p')
		b = appendMsgpackLen(b, 0xc4, len(ev.Resp))
		b = append(b, ev.Resp...)
	}
	b = append(b, 0xa4, 'd', 'a', 't', 'a')
	if ev.Data == nil {
		return append(b, 0xc0)
	}
	return append(b, ev.Data...)
}

func appendMsgpackStr(b []byte, s string) []byte {
	if l := len(s); l < 32 {
		b = append(b, 0xa0|byte(l))
	} else {
		b = appendMsgpackLen(b, 0xd9, l)
	}
	return append(b, s...)
}

// appendMsgpackLen appends the header of a str (str8 = 0xd9) or bin
// (bin8 = 0xc4) of l bytes: the 8-, 16- and 32-bit forms of each have
// consecutive codes, so str8 or bin8 names all three.
func appendMsgpackLen(b []byte, code8 byte, l int) []byte {
	switch {
	case l < 256:
		return append(b, code8, byte(l))
	case l <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, code8+1), uint16(l))
	}
	return binary.BigEndian.AppendUint32(append(b, code8+2), uint32(l))
}

// appendMsgpackInt is msgpack's compact int: the smallest of fixint,
// uint8/16/32/64 for n ≥ 0 and negative fixint, int8/16/32/64 below.
func appendMsgpackInt(b []byte, n int64) []byte {
	switch {
	case n >= 0 && n <= math.MaxInt8:
		return append(b, byte(n))
	case n >= 0 && n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n >= 0 && n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n >= 0 && n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	case n >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// checkData reports whether data is exactly one msgpack value: an envelope
// around anything else would not decode, and a log must never hold an
// entry its readers cannot decode.
func CheckData(data []byte) error {
	if len(data) == 0 {
		return errors.New("empty payload")
	}
	n, err := ValueLen(data)
	if err != nil {
		return fmt.Errorf("payload is not msgpack: %v", err)
	}
	if n != len(data) {
		return fmt.Errorf("payload has %d trailing bytes", len(data)-n)
	}
	return nil
}

// msgpackBytes reads the str (code8 str8 = 0xd9, fixstr too) or bin
// (bin8 = 0xc4) at b[p] that appendMsgpackLen's header starts: its bytes,
// not copied, and the position after it. ok is false for another code or
// a value running past the end of b.
func msgpackBytes(b []byte, p int, code8 byte) (v []byte, next int, ok bool) {
	if p >= len(b) {
		return nil, p, false
	}
	var l, h int
	switch c := b[p]; {
	case code8 == 0xd9 && c&0xe0 == 0xa0:
		l, h = int(c&0x1f), 1
	case c == code8 && p+2 <= len(b):
		l, h = int(b[p+1]), 2
	case c == code8+1 && p+3 <= len(b):
		l, h = int(binary.BigEndian.Uint16(b[p+1:])), 3
	case c == code8+2 && p+5 <= len(b):
		l, h = int(binary.BigEndian.Uint32(b[p+1:])), 5
	default:
		return nil, p, false
	}
	if l < 0 || p+h+l > len(b) {
		return nil, p, false
	}
	return b[p+h : p+h+l], p + h + l, true
}

// decodeEnvelopeFast decodes the canonical envelope layout appendEnvelope
// writes (keys in declaration order, seq and ts fixed-width, strings as
// str, resp as bin) without reflection; ok is false for any other layout,
// which the caller then hands to DecodeEnvelope. Where it succeeds
// it yields exactly what DecodeEnvelope yields (FuzzEntry checks),
// copying every byte so that no event pins a segment buffer.
func decodeEnvelopeFast(b []byte) (ev *Event, ok bool) {
	if !envelopeFast || len(b) < 1 || b[0]&0xf0 != 0x80 {
		return nil, false
	}
	n := int(b[0] & 0x0f)
	if n < 7 || n > 10 {
		return nil, false
	}
	p := 1
	key := func(k string) bool {
		if p+1+len(k) > len(b) || b[p] != 0xa0|byte(len(k)) || string(b[p+1:p+1+len(k)]) != k {
			return false
		}
		p += 1 + len(k)
		return true
	}
	u64 := func(code byte) (uint64, bool) {
		if p+9 > len(b) || b[p] != code {
			return 0, false
		}
		v := binary.BigEndian.Uint64(b[p+1 : p+9])
		p += 9
		return v, true
	}
	// Strings are read as spans of b and copied at the end, with resp and
	// data, into one allocation.
	str := func() ([]byte, bool) {
		v, next, ok := msgpackBytes(b, p, 0xd9)
		p = next
		return v, ok
	}
	var e Event
	var good bool
	if !key("seq") {
		return nil, false
	}
	if e.Seq, good = u64(0xcf); !good || !key("v") {
		return nil, false
	}
	// v: msgpack's compact int, as appendMsgpackInt writes it.
	if p >= len(b) {
		return nil, false
	}
	switch c := b[p]; {
	case c <= 0x7f:
		e.V, p = int(c), p+1
	case c == 0xcc && p+2 <= len(b):
		e.V, p = int(b[p+1]), p+2
	case c == 0xcd && p+3 <= len(b):
		e.V, p = int(binary.BigEndian.Uint16(b[p+1:])), p+3
	case c == 0xce && p+5 <= len(b):
		e.V, p = int(binary.BigEndian.Uint32(b[p+1:])), p+5
	default: // negative or huge versions are not valid anyway
		return nil, false
	}
	var id, typ, stream, req, rh []byte
	if !key("id") {
		return nil, false
	}
	if id, good = str(); !good || !key("type") {
		return nil, false
	}
	if typ, good = str(); !good || !key("ts") {
		return nil, false
	}
	ts, good := u64(0xd3)
	if !good || !key("stream") {
		return nil, false
	}
	e.TS = int64(ts)
	if stream, good = str(); !good {
		return nil, false
	}
	fields := 7
	if key("req") {
		if req, good = str(); !good {
			return nil, false
		}
		fields++
	}
	if key("rh") {
		if rh, good = str(); !good {
			return nil, false
		}
		fields++
	}
	var resp []byte
	if key("resp") {
		if resp, p, good = msgpackBytes(b, p, 0xc4); !good {
			return nil, false
		}
		fields++
	}
	if fields != n || !key("data") || p >= len(b) {
		return nil, false
	}
	var data []byte
	if b[p] == 0xc0 {
		p++ // nil
	} else {
		l, err := ValueLen(b[p:])
		if err != nil {
			return nil, false
		}
		data = b[p : p+l]
		p += l
	}
	if p != len(b) {
		return nil, false
	}
	// One allocation for the strings and one for both byte fields, as
	// before (resp's capacity capped, so that it cannot grow into data);
	// the strings apart, so that one kept alone (an id in a map) holds
	// only them, not the payload. A type of the catalogue is its
	// registered name (no copy).
	info, known := registry[string(typ)]
	if known {
		e.Type = info.Type
		typ = nil
	}
	strs := make([]byte, 0, len(id)+len(typ)+len(stream)+len(req)+len(rh))
	asString := func(v []byte) string {
		if len(v) == 0 {
			return ""
		}
		at := len(strs)
		strs = append(strs, v...)
		return unsafe.String(&strs[at], len(v))
	}
	e.ID, e.Stream, e.Req, e.ReqHash = asString(id), asString(stream), asString(req), asString(rh)
	if !known {
		e.Type = asString(typ)
	}
	buf := make([]byte, len(resp)+len(data))
	copy(buf, resp)
	copy(buf[len(resp):], data)
	if resp != nil {
		e.Resp = buf[:len(resp):len(resp)]
	}
	if data != nil {
		e.Data = buf[len(resp):]
	}
	return &e, true
}

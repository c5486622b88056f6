package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"reflect"

	"github.com/cmlab/cmlab/events"
)

// entryVersion is the first byte of every entry.
const entryVersion = 0xC1

// entryHeader is the version byte plus the CRC32C.
const entryHeader = 5

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error about damaged log bytes.
var ErrCorrupt = errors.New("wal: corrupt")

// EncodeEntry returns the entry bytes for ev: version, CRC32C, envelope.
// The envelope bytes are exactly those of events.EncodeEnvelope.
func EncodeEntry(ev *events.Event) ([]byte, error) {
	var b []byte
	if envelopeFast {
		b = appendEnvelope(make([]byte, entryHeader, entryHeader+96+len(ev.ID)+len(ev.Type)+len(ev.Stream)+len(ev.Req)+len(ev.ReqHash)+len(ev.Resp)+len(ev.Data)), ev)
	} else {
		env, err := events.EncodeEnvelope(ev)
		if err != nil {
			return nil, err
		}
		b = make([]byte, entryHeader+len(env))
		copy(b[entryHeader:], env)
	}
	b[0] = entryVersion
	binary.BigEndian.PutUint32(b[1:5], crc32.Checksum(b[entryHeader:], castagnoli))
	return b, nil
}

// DecodeEntry checks and decodes entry bytes. wantSeq, when non-zero, must
// equal the stored seq. Every failure wraps ErrCorrupt.
func DecodeEntry(b []byte, wantSeq uint64) (*events.Event, error) {
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("%w: empty entry", ErrCorrupt)
	case len(b) < entryHeader:
		return nil, fmt.Errorf("%w: entry of %d bytes is shorter than its header", ErrCorrupt, len(b))
	case b[0] != entryVersion:
		return nil, fmt.Errorf("%w: version byte 0x%02x, want 0x%02x", ErrCorrupt, b[0], entryVersion)
	}
	env := b[entryHeader:]
	if got, want := crc32.Checksum(env, castagnoli), binary.BigEndian.Uint32(b[1:5]); got != want {
		return nil, fmt.Errorf("%w: crc32c mismatch (stored %08x, computed %08x)", ErrCorrupt, want, got)
	}
	ev, ok := decodeEnvelopeFast(env)
	if ok && (ev.Type == "" || ev.V < 1 || ev.ID == "") {
		ok = false // let events.DecodeEnvelope word the error
	}
	if !ok {
		var err error
		if ev, err = events.DecodeEnvelope(env); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	if wantSeq != 0 && ev.Seq != wantSeq {
		return nil, fmt.Errorf("%w: entry stores seq %d at index %d", ErrCorrupt, ev.Seq, wantSeq)
	}
	return ev, nil
}

// The committer's hot path encodes envelopes by hand instead of through
// msgpack's reflection (four times faster), producing exactly the bytes of
// events.EncodeEnvelope: a fixmap of the non-empty fields in declaration
// order, seq as a fixed-width uint64, v as msgpack's compact int, ts as a
// fixed-width int64, strings as str, resp as bin, data as its raw bytes.
// envelopeFields is the layout this relies on; Open checks it against
// events.Event by reflection and falls back to the library on a mismatch,
// and the tests and FuzzEnvelope compare both encoders byte for byte.
// envelopeFast is fixed at init: the layout of a compiled type cannot change.
var envelopeFast = envelopeLayoutKnown()

var envelopeFields = [...]string{"seq", "v", "id", "type", "ts", "stream", "req,omitempty", "rh,omitempty", "resp,omitempty", "data"}

// envelopeLayoutKnown reports whether events.Event still has the fields
// appendEnvelope writes.
func envelopeLayoutKnown() bool {
	t := reflect.TypeOf(events.Event{})
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
// one complete msgpack value (checkData).
func appendEnvelope(b []byte, ev *events.Event) []byte {
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
		switch l := len(ev.Resp); {
		case l < 256:
			b = append(b, 0xc4, byte(l))
		case l <= math.MaxUint16:
			b = append(b, 0xc5)
			b = binary.BigEndian.AppendUint16(b, uint16(l))
		default:
			b = append(b, 0xc6)
			b = binary.BigEndian.AppendUint32(b, uint32(l))
		}
		b = append(b, ev.Resp...)
	}
	b = append(b, 0xa4, 'd', 'a', 't', 'a')
	if ev.Data == nil {
		return append(b, 0xc0)
	}
	return append(b, ev.Data...)
}

func appendMsgpackStr(b []byte, s string) []byte {
	switch l := len(s); {
	case l < 32:
		b = append(b, 0xa0|byte(l))
	case l < 256:
		b = append(b, 0xd9, byte(l))
	case l <= math.MaxUint16:
		b = append(b, 0xda)
		b = binary.BigEndian.AppendUint16(b, uint16(l))
	default:
		b = append(b, 0xdb)
		b = binary.BigEndian.AppendUint32(b, uint32(l))
	}
	return append(b, s...)
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
func checkData(data []byte) error {
	if len(data) == 0 {
		return errors.New("empty payload")
	}
	n, err := events.ValueLen(data)
	if err != nil {
		return fmt.Errorf("payload is not msgpack: %v", err)
	}
	if n != len(data) {
		return fmt.Errorf("payload has %d trailing bytes", len(data)-n)
	}
	return nil
}

// decodeEnvelopeFast decodes the canonical envelope layout appendEnvelope
// writes (keys in declaration order, seq and ts fixed-width, strings as
// str, resp as bin) without reflection; ok is false for any other layout,
// which the caller then hands to events.DecodeEnvelope. Where it succeeds
// it yields exactly what events.DecodeEnvelope yields (FuzzEntry checks),
// copying every byte so that no event pins a segment buffer.
func decodeEnvelopeFast(b []byte) (ev *events.Event, ok bool) {
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
	str := func() (string, bool) {
		if p >= len(b) {
			return "", false
		}
		c, l, h := b[p], 0, 0
		switch {
		case c&0xe0 == 0xa0:
			l, h = int(c&0x1f), 1
		case c == 0xd9 && p+2 <= len(b):
			l, h = int(b[p+1]), 2
		case c == 0xda && p+3 <= len(b):
			l, h = int(binary.BigEndian.Uint16(b[p+1:])), 3
		case c == 0xdb && p+5 <= len(b):
			l, h = int(binary.BigEndian.Uint32(b[p+1:])), 5
		default:
			return "", false
		}
		if l < 0 || p+h+l > len(b) {
			return "", false
		}
		s := string(b[p+h : p+h+l])
		p += h + l
		return s, true
	}
	var e events.Event
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
	if !key("id") {
		return nil, false
	}
	if e.ID, good = str(); !good || !key("type") {
		return nil, false
	}
	if e.Type, good = str(); !good || !key("ts") {
		return nil, false
	}
	ts, good := u64(0xd3)
	if !good || !key("stream") {
		return nil, false
	}
	e.TS = int64(ts)
	if e.Stream, good = str(); !good {
		return nil, false
	}
	fields := 7
	if key("req") {
		if e.Req, good = str(); !good {
			return nil, false
		}
		fields++
	}
	if key("rh") {
		if e.ReqHash, good = str(); !good {
			return nil, false
		}
		fields++
	}
	var resp []byte
	if key("resp") {
		if p >= len(b) {
			return nil, false
		}
		c, l, h := b[p], 0, 0
		switch {
		case c == 0xc4 && p+2 <= len(b):
			l, h = int(b[p+1]), 2
		case c == 0xc5 && p+3 <= len(b):
			l, h = int(binary.BigEndian.Uint16(b[p+1:])), 3
		case c == 0xc6 && p+5 <= len(b):
			l, h = int(binary.BigEndian.Uint32(b[p+1:])), 5
		default:
			return nil, false
		}
		if l < 0 || p+h+l > len(b) {
			return nil, false
		}
		resp = b[p+h : p+h+l]
		p += h + l
		fields++
	}
	if fields != n || !key("data") || p >= len(b) {
		return nil, false
	}
	var data []byte
	if b[p] == 0xc0 {
		p++ // nil
	} else {
		l, err := events.ValueLen(b[p:])
		if err != nil {
			return nil, false
		}
		data = b[p : p+l]
		p += l
	}
	if p != len(b) {
		return nil, false
	}
	// One allocation for both byte fields.
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

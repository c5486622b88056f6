package fuzz

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// FuzzPayloadRoundTrip checks, for every registered event type (the fuzzer
// picks one with typeIdx):
//
//  1. bytes that decode into the payload re-encode to canonical bytes that
//     decode again and re-encode to the very same bytes (identity on the
//     canonical form, which a rebuild relies on);
//  2. the same bytes carried in an envelope survive EncodeEnvelope,
//     DecodeEnvelope and Event.Decode unchanged;
//  3. a typed value generated from the fuzz bytes survives encode then
//     decode: decode∘encode is the identity on values.
func FuzzPayloadRoundTrip(f *testing.F) {
	types := events.Types()
	if len(types) == 0 {
		f.Fatal("no registered event types")
	}
	for i := range types {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{0x80})
		f.Add(uint8(i), []byte("\x81\xa4data\xc4\x01x"))
		f.Add(uint8(i), bytes.Repeat([]byte{byte(i * 37)}, 64))
	}
	f.Fuzz(func(t *testing.T, typeIdx uint8, data []byte) {
		typ := types[int(typeIdx)%len(types)]
		info, ok := events.Lookup(typ)
		if !ok {
			t.Fatalf("Types lists %q but Lookup does not find it", typ)
		}

		// 1. arbitrary bytes → value → canonical bytes is a fixpoint.
		p := info.New()
		if err := events.Unmarshal(data, p); err == nil {
			canon, err := events.Marshal(p)
			if err != nil {
				t.Fatalf("%s: re-encode of decoded payload: %v", typ, err)
			}
			p2 := info.New()
			if err := events.Unmarshal(canon, p2); err != nil {
				t.Fatalf("%s: canonical bytes do not decode: %v\n%x", typ, err, canon)
			}
			again, err := events.Marshal(p2)
			if err != nil {
				t.Fatalf("%s: encode: %v", typ, err)
			}
			if !bytes.Equal(canon, again) {
				t.Fatalf("%s: canonical form is not a fixpoint\nfirst  %x\nsecond %x", typ, canon, again)
			}
			checkEnvelope(t, typ, info.Version, canon)
		}

		// 3. generated value → bytes → value.
		rng := rand.New(rand.NewPCG(seedOf(data), uint64(typeIdx)))
		v := info.New()
		fill(reflect.ValueOf(v).Elem(), rng, 0)
		enc, err := events.Marshal(v)
		if err != nil {
			t.Fatalf("%s: encode generated value: %v", typ, err)
		}
		back := info.New()
		if err := events.Unmarshal(enc, back); err != nil {
			t.Fatalf("%s: decode of encoded generated value: %v\n%x", typ, err, enc)
		}
		if !reflect.DeepEqual(v, back) {
			t.Fatalf("%s: decode(encode(v)) != v\nv    %#v\nback %#v", typ, v, back)
		}
		enc2, err := events.Marshal(back)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("%s: encoding is not deterministic (err %v)\n%x\n%x", typ, err, enc, enc2)
		}
		checkEnvelope(t, typ, info.Version, enc)
	})
}

// checkEnvelope wraps payload bytes in an envelope, round-trips it and
// checks Event.Decode yields a payload that re-encodes to the same bytes.
func checkEnvelope(t *testing.T, typ string, version int, data []byte) {
	t.Helper()
	ev := &events.Event{Seq: 7, V: version, ID: "0190d3c2-0000-7000-8000-000000000000", Type: typ, TS: 1770336000000, Stream: "s", Data: data}
	b, err := events.EncodeEnvelope(ev)
	if err != nil {
		t.Fatalf("%s: encode envelope: %v", typ, err)
	}
	got, err := events.DecodeEnvelope(b)
	if err != nil {
		t.Fatalf("%s: decode envelope: %v", typ, err)
	}
	if got.Seq != ev.Seq || got.Type != typ || got.V != version || got.ID != ev.ID || got.TS != ev.TS || !bytes.Equal(got.Data, data) {
		t.Fatalf("%s: envelope changed in round trip: %+v", typ, got)
	}
	p, err := got.Decode()
	if err != nil {
		t.Fatalf("%s: Event.Decode of canonical payload: %v", typ, err)
	}
	if p.EventType() != typ {
		t.Fatalf("Event.Decode of %s returned a %s", typ, p.EventType())
	}
	re, err := events.Marshal(p)
	if err != nil || !bytes.Equal(re, data) {
		t.Fatalf("%s: payload from Event.Decode re-encodes differently (err %v)\nwant %x\ngot  %x", typ, err, data, re)
	}
}

func seedOf(b []byte) uint64 {
	var s uint64 = 1469598103934665603
	for _, c := range b {
		s ^= uint64(c)
		s *= 1099511628211
	}
	return s
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// fill sets v to a random value of its type. Empty slices of omitempty
// fields are left nil (omitempty drops them, so nil is what decodes), and
// floats are finite (NaN is never equal to itself).
func fill(v reflect.Value, rng *rand.Rand, depth int) {
	if v.Type() == rawMessageType {
		if rng.IntN(3) > 0 {
			samples := []string{`{}`, `{"a":1}`, `[1,2,"x"]`, `"yes"`, `null`, `{"q1":"yes","q2":"text \u00e9"}`}
			v.SetBytes([]byte(samples[rng.IntN(len(samples))]))
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			fv := v.Field(i)
			fill(fv, rng, depth+1)
			if strings.Contains(sf.Tag.Get("json"), "omitempty") && (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0 {
				fv.SetZero()
			}
		}
	case reflect.Pointer:
		if depth > 6 || rng.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), rng, depth+1)
		v.Set(p)
	case reflect.Slice:
		if depth > 6 {
			return
		}
		n := rng.IntN(4)
		if n == 0 && rng.IntN(2) == 0 {
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			fill(s.Index(i), rng, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		n := rng.IntN(3)
		m := reflect.MakeMapWithSize(v.Type(), n)
		for i := 0; i < n; i++ {
			k := reflect.New(v.Type().Key()).Elem()
			fill(k, rng, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, rng, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.String:
		v.SetString(randString(rng))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		switch rng.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(int64(rng.IntN(101)))
		case 2:
			v.SetInt(-1 << (bits - 1)) // minimum
		default:
			v.SetInt(int64(rng.Uint64() >> (65 - bits)))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := v.Type().Bits()
		if rng.IntN(2) == 0 {
			v.SetUint(uint64(rng.IntN(1000)))
		} else {
			v.SetUint(rng.Uint64() >> (64 - bits))
		}
	case reflect.Float32, reflect.Float64:
		f := []float64{0, -0.5, 1e-300, math.MaxFloat64, 12.25, rng.NormFloat64() * 1e6}[rng.IntN(6)]
		v.SetFloat(f)
	}
}

func randString(rng *rand.Rand) string {
	switch rng.IntN(5) {
	case 0:
		return ""
	case 1:
		return "fb_" + strings.Repeat("x", rng.IntN(40))
	case 2:
		return "line\nbreak \"quoted\" \\ \u2028 é 🙂"
	case 3:
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.IntN(256)) // invalid UTF-8 on purpose: msgpack strings are bytes
		}
		return string(b)
	default:
		return strings.Repeat("ab", rng.IntN(20000))
	}
}

package events

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// fill sets every field of v (a pointer) to a non-zero value derived from
// its path, recursing into structs, pointers, slices and maps.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(t, v.Elem(), path)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.String:
		v.SetString("s" + path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(len(path)%100) - 7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(len(path)%100) + 3)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Slice:
		switch v.Type() {
		case reflect.TypeOf(json.RawMessage(nil)):
			v.SetBytes([]byte(`{"k":[1,"x"]}`))
		case reflect.TypeOf(msgpack.RawMessage(nil)):
			v.SetBytes([]byte{0x92, 0x01, 0xa1, 'x'})
		default:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				v.SetBytes([]byte("b" + path))
				return
			}
			s := reflect.MakeSlice(v.Type(), 2, 2)
			for i := 0; i < 2; i++ {
				fill(t, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
			v.Set(s)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := 0; i < 3; i++ {
			k := reflect.New(v.Type().Key()).Elem()
			fill(t, k, fmt.Sprintf("%s{%d}", path, i))
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, fmt.Sprintf("%s{%d}v", path, i))
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("i" + path))
	default:
		t.Fatalf("%s: cannot fill kind %s", path, v.Kind())
	}
}

func TestRoundTripEveryRegisteredType(t *testing.T) {
	types := Types()
	if len(types) < 20 {
		t.Fatalf("only %d registered types", len(types))
	}
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			info, _ := Lookup(typ)
			p := info.New()
			if p.EventType() != typ {
				t.Fatalf("New() is a %s", p.EventType())
			}
			fill(t, reflect.ValueOf(p), typ)
			ev, err := New("stream-1", p)
			if err != nil {
				t.Fatal(err)
			}
			ev.Seq, ev.TS = 42, 1_760_000_000_123
			ev.WithRequest("req-1", "sha256-ab", json.RawMessage(`{"id":"x"}`))
			b, err := EncodeEnvelope(ev)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeEnvelope(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, ev) {
				t.Fatalf("envelope changed:\n%+v\n%+v", back, ev)
			}
			got, err := back.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("payload changed:\n%#v\n%#v", got, p)
			}
			// And the zero value.
			z := info.New()
			zev, err := New("s", z)
			if err != nil {
				t.Fatal(err)
			}
			zb, _ := EncodeEnvelope(zev)
			zback, err := DecodeEnvelope(zb)
			if err != nil {
				t.Fatal(err)
			}
			if zp, err := zback.Decode(); err != nil || !reflect.DeepEqual(zp, z) {
				t.Fatalf("zero payload: %#v %v", zp, err)
			}
		})
	}
}

func goldenEvent(t *testing.T) *Event {
	t.Helper()
	ev, err := New("lab_2026", &WalRepaired{Segment: "00000000000000000001", Offset: 4096, Length: 37, Quarantine: "00000000000000000001-at-4096.torn", Reason: "bad crc", FirstSeq: 118})
	if err != nil {
		t.Fatal(err)
	}
	ev.Seq, ev.TS, ev.ID = 118, 1_760_000_000_000, "019a2b3c-0000-7000-8000-000000000001"
	ev.WithRequest("req-9", "sha256-0f", json.RawMessage(`{"ok":true}`))
	return ev
}

func TestEncodingIsDeterministicAndGolden(t *testing.T) {
	ev := goldenEvent(t)
	first, err := EncodeEnvelope(ev)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		b, _ := EncodeEnvelope(goldenEvent(t))
		if !bytes.Equal(b, first) {
			t.Fatalf("encoding %d differs", i)
		}
	}
	path := filepath.Join("testdata", "envelope_wal_repaired.hex")
	got := hex.EncodeToString(first) + "\n"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Fatalf("envelope bytes changed (the log format is frozen):\ngot  %s\nwant %s", got, want)
	}
	// Maps are written with sorted keys, whatever the iteration order.
	// (msgpack sorts only map[string]string, map[string]bool and
	// map[string]any; TestPayloadsHaveOnlySortableMaps keeps payloads to those.)
	m := map[string]any{}
	for i := 0; i < 64; i++ {
		m[fmt.Sprintf("k%02d", 63-i)] = i
	}
	mb, _ := Marshal(m)
	for i := 0; i < 20; i++ {
		again, _ := Marshal(m)
		if !bytes.Equal(again, mb) {
			t.Fatal("map encoding is not deterministic")
		}
	}
	if k := bytes.Index(mb, []byte("k00")); k < 0 || k > bytes.Index(mb, []byte("k01")) {
		t.Fatal("map keys are not sorted")
	}
}

func TestDecodeErrors(t *testing.T) {
	ev := goldenEvent(t)
	for _, tc := range []struct {
		name string
		mod  func(e *Event)
		want error
	}{
		{"unknown type", func(e *Event) { e.Type = "no.such.type" }, ErrUnknownType},
		{"newer version", func(e *Event) { e.V = 99 }, ErrUnknownVersion},
		{"version zero", func(e *Event) { e.V = 0 }, ErrUnknownVersion},
		{"bad payload", func(e *Event) { e.Data = msgpack.RawMessage{0x01} }, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *ev
			tc.mod(&c)
			if _, err := c.Decode(); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	for _, b := range [][]byte{nil, {0xc1}, {0x80}, []byte("\x81\xa4type\xa1x")} {
		if _, err := DecodeEnvelope(b); !errors.Is(err, ErrMalformed) {
			t.Fatalf("DecodeEnvelope(% x): %v", b, err)
		}
	}
	if _, err := New("s", testOnlyPayload{}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("New of an unregistered type: %v", err)
	}
}

// testOnlyPayload is registered by TestUpcasting only, for its duration.
type testOnlyPayload struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Unit  string `json:"unit"`
}

func (testOnlyPayload) EventType() string { return "test.upcast" }

func TestUpcasting(t *testing.T) {
	// v1 {title}, v2 renamed title→name, v3 added count and unit.
	info := &TypeInfo{Type: "test.upcast", Version: 3, New: func() Payload { return &testOnlyPayload{} },
		Upcasters: map[int]Upcaster{
			1: func(m map[string]any) (map[string]any, error) {
				m["name"] = m["title"]
				delete(m, "title")
				return m, nil
			},
			2: func(m map[string]any) (map[string]any, error) {
				m["count"] = 1
				m["unit"] = "run"
				return m, nil
			},
		}}
	registry[info.Type] = info
	defer delete(registry, info.Type)

	v1, _ := Marshal(map[string]any{"title": "baseline"})
	v2, _ := Marshal(map[string]any{"name": "baseline"})
	v3, _ := Marshal(testOnlyPayload{Name: "baseline", Count: 1, Unit: "run"})
	want := &testOnlyPayload{Name: "baseline", Count: 1, Unit: "run"}
	for v, data := range map[int][]byte{1: v1, 2: v2, 3: v3} {
		ev := &Event{Seq: 1, V: v, ID: "x", Type: info.Type, Data: data}
		got, err := ev.Decode()
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("v%d upcast to %#v", v, got)
		}
	}
	// A missing upcaster is an error, not a guess.
	delete(info.Upcasters, 2)
	ev := &Event{Seq: 1, V: 1, ID: "x", Type: info.Type, Data: v1}
	if _, err := ev.Decode(); err == nil || !strings.Contains(err.Error(), "no upcaster from v2") {
		t.Fatalf("missing upcaster: %v", err)
	}
}

// TestPayloadsHaveOnlySortableMaps: msgpack's SetSortMapKeys covers only
// map[string]string, map[string]bool and map[string]any; any other map type
// in a payload would be encoded in random order and break determinism.
func TestPayloadsHaveOnlySortableMaps(t *testing.T) {
	ok := map[reflect.Type]bool{
		reflect.TypeOf(map[string]string(nil)): true,
		reflect.TypeOf(map[string]bool(nil)):   true,
		reflect.TypeOf(map[string]any(nil)):    true,
	}
	seen := map[reflect.Type]bool{}
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		if seen[tp] {
			return
		}
		seen[tp] = true
		switch tp.Kind() {
		case reflect.Map:
			if !ok[tp] {
				t.Errorf("%s is a %s: msgpack would encode it in random key order", path, tp)
			}
			walk(tp.Elem(), path+"[]")
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(tp.Elem(), path)
		case reflect.Struct:
			for i := 0; i < tp.NumField(); i++ {
				walk(tp.Field(i).Type, path+"."+tp.Field(i).Name)
			}
		}
	}
	for _, typ := range Types() {
		info, _ := Lookup(typ)
		walk(reflect.TypeOf(info.New()), typ)
	}
	walk(reflect.TypeOf(Event{}), "Event")
}

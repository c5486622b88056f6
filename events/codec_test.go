package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// The envelope codec's tests (moved from package wal with the codec).

func codecTestEvent(i int) *Event {
	return MustNew(fmt.Sprintf("stream-%d", i%7), &WalSalvaged{
		LostSeq: uint64(i), Segment: "test", Reason: strings.Repeat("r", 40) + fmt.Sprint(i),
	})
}

func TestEnvelopeLayoutKnown(t *testing.T) {
	if !envelopeLayoutKnown() {
		t.Fatal("Event changed: update appendEnvelopeFast and envelopeFields")
	}
}

func TestFastEnvelopeMatchesLibraryEncoder(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	strs := []string{"", "a", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("s", 255), strings.Repeat("s", 256), strings.Repeat("s", 65535), strings.Repeat("s", 65536), "ünïcødé"}
	resps := []json.RawMessage{nil, {}, json.RawMessage(`{"ok":true}`), json.RawMessage(strings.Repeat("x", 300)), json.RawMessage(strings.Repeat("x", 70000))}
	n := 0
	check := func(ev *Event) {
		t.Helper()
		want, err := EncodeEnvelope(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEnvelopeFast(nil, ev); !bytes.Equal(got, want) {
			t.Fatalf("event %+v:\nfast    % x\nlibrary % x", ev, got[:min(len(got), 80)], want[:min(len(want), 80)])
		}
		// And the fast decoder reads back what the library reads back.
		lib, lerr := DecodeEnvelope(want)
		fast, ok := decodeEnvelopeFast(want)
		// (Versions outside 0…2³²-1 are left to the library.)
		mustFast := ev.V >= 0 && ev.V <= math.MaxUint32
		if lerr == nil && ((mustFast && !ok) || (ok && !reflect.DeepEqual(fast, lib))) {
			t.Fatalf("fast decode ok=%v:\n%#v\nlibrary:\n%#v", ok, fast, lib)
		}
		n++
	}
	for _, typ := range Types() {
		info, _ := Lookup(typ)
		data, err := Marshal(info.New())
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range ints {
			ev := &Event{Seq: uint64(v), V: int(v), ID: strs[i%len(strs)], Type: typ, TS: v, Stream: strs[(i+3)%len(strs)], Data: data}
			check(ev)
			ev.Req, ev.ReqHash, ev.Resp = strs[(i+1)%len(strs)], strs[(i+2)%len(strs)], resps[i%len(resps)]
			check(ev)
			ev.Data = nil
			check(ev)
		}
	}
	t.Logf("%d envelopes compared", n)
}

func TestCheckDataAgreesWithDecoder(t *testing.T) {
	good := [][]byte{}
	for _, v := range []any{nil, true, 1, -1, 300, -300, 1 << 40, 1.5, float32(2.5), "x", strings.Repeat("y", 300), []byte("bin"), []any{1, "a", []int{2}}, map[string]any{"a": 1, "b": []string{"c"}}, msgpack.RawMessage{0xd4, 1, 2}} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, b)
	}
	for _, b := range good {
		if err := CheckData(b); err != nil {
			t.Errorf("% x: %v", b, err)
		}
		for cut := 0; cut < len(b); cut++ {
			if err := CheckData(b[:cut]); err == nil {
				t.Errorf("truncated % x accepted", b[:cut])
			}
		}
		if err := CheckData(append(bytes.Clone(b), 0x01)); err == nil {
			t.Errorf("trailing byte after % x accepted", b)
		}
	}
	if err := CheckData([]byte{0xc1}); err == nil {
		t.Error("0xc1 accepted")
	}
}

// FuzzCheckData: the payload check accepts exactly what the msgpack
// decoder reads as one complete value.
func FuzzCheckData(f *testing.F) {
	for _, s := range [][]byte{{0x01}, {0x92, 0x01, 0xa1, 'x'}, {0x81, 0xa1, 'k', 0xc0}, {0xc1}, {0xdc, 0x00}, {0xd9, 0x05, 'a'}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		dec := msgpack.NewDecoder(r)
		derr := dec.Skip()
		libOK := len(b) > 0 && derr == nil && r.Len() == 0
		if ourOK := CheckData(b) == nil; ourOK != libOK {
			t.Fatalf("% x: checkData ok=%v, decoder ok=%v (%v, %d left)", b, ourOK, libOK, derr, r.Len())
		}
	})
}

// FuzzDecodeEnvelopeFast: wherever the fast decoder accepts bytes, the
// library decoder accepts them too and yields the identical event.
func FuzzDecodeEnvelopeFast(f *testing.F) {
	for i := 0; i < 4; i++ {
		ev := codecTestEvent(i)
		ev.Seq, ev.TS = uint64(i), int64(i)*1000
		if i%2 == 1 {
			ev.WithRequest("r", "h", json.RawMessage(`{"a":1}`))
		}
		b, _ := EncodeEnvelope(ev)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeEnvelopeFast(b)
		if !ok {
			return
		}
		var lib Event
		if err := Unmarshal(b, &lib); err != nil {
			t.Fatalf("fast decoder accepted what the library refuses (%v): % x", err, b)
		}
		if !reflect.DeepEqual(*fast, lib) {
			t.Fatalf("decoders differ:\nfast    %#v\nlibrary %#v", *fast, lib)
		}
	})
}

// BenchmarkDecodeEnvelopeFast is the log readers' decode of one envelope
// of a Lab log's most common kind: a feedback submit with a request id.
func BenchmarkDecodeEnvelopeFast(b *testing.B) {
	r := 80
	ev := MustNew("lab_0194d5e0-0000-7000-8000-000000000001", &FeedbackSubmitted{Entry: FeedbackEntry{SchemaVersion: 1,
		ID: "fb_0194d5e0-0000-7000-8000-00000000002a", SessionID: "lab_0194d5e0-0000-7000-8000-000000000001", RunID: "run_17",
		Topic: "cats", VideoPath: "/data/out/17/video.mp4", Ratings: &Ratings{Overall: &r, Hook: &r}, Notes: "the hook is slow",
		Tags: []string{"hook", "pacing"}}})
	ev.WithRequest("req-0194d5e0-0000-7000-8000-00000000002a", "sha256-"+strings.Repeat("ab", 32), json.RawMessage(`{"feedbackId":"fb_0194d5e0-0000-7000-8000-00000000002a"}`))
	env, err := EncodeEnvelope(ev)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(env)))
	for b.Loop() {
		if _, ok := decodeEnvelopeFast(env); !ok {
			b.Fatal("not decoded")
		}
	}
}

// TestDecodeEnvelopeFastAllocations: the fast decoder makes the event, one
// allocation for its strings and one for resp and data; a type of the
// catalogue is not copied; the strings do not share the payload's bytes
// (an id kept alone holds only the strings), and neither byte field can
// grow into the other.
func TestDecodeEnvelopeFastAllocations(t *testing.T) {
	ev := codecTestEvent(3)
	ev.WithRequest("req-1", "sha256-1", json.RawMessage(`{"ok":true}`))
	env, err := EncodeEnvelope(ev)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { decodeEnvelopeFast(env) }); n > 3 {
		t.Fatalf("%v allocations per decode, want at most 3", n)
	}
	got, ok := decodeEnvelopeFast(env)
	if !ok {
		t.Fatal("not decoded")
	}
	if info, _ := Lookup(got.Type); unsafe.StringData(got.Type) != unsafe.StringData(info.Type) {
		t.Error("the type was copied, not taken from the catalogue")
	}
	want := *got
	want.ID, want.Stream = strings.Clone(got.ID), strings.Clone(got.Stream)
	for i := range got.Data {
		got.Data[i] = 'x'
	}
	got.Resp = append(got.Resp, 'y')
	if got.ID != want.ID || got.Stream != want.Stream || string(got.Data) != strings.Repeat("x", len(got.Data)) {
		t.Fatalf("the fields share bytes: %+v", got)
	}
}

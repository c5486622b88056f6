package events

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// An envelope whose field declares a 1.9 GB bin, in 16 bytes, is refused
// without the decoder allocating for it: repeated, it used to grow the
// pooled decoder's buffer by a quarter each time (a fuzz worker reached
// 16 GB).
func TestUnmarshalRefusesDeclaredLengthsPastTheInput(t *testing.T) {
	b := []byte("\x87\xa5000\xac\xca\xc6t\xfd00\x950000")
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i := 0; i < 20; i++ {
		if _, err := DecodeEnvelope(b); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "truncated value") {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	runtime.ReadMemStats(&m1)
	if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 1<<20 {
		t.Fatalf("20 decodes of a 16-byte envelope allocated %d bytes", grew)
	}
}

func TestValueLen(t *testing.T) {
	for _, c := range []struct {
		b    string
		n    int
		fail string
	}{
		{"\xc0", 1, ""},
		{"\x01\x02", 1, ""},
		{"\xa3abc", 4, ""},
		{"\xa3ab", 0, "truncated value"},
		{"\xc4\x02xy", 4, ""},
		{"\xc6\x7f\xff\xff\xffxy", 0, "truncated value"},
		{"\xdd\x7f\xff\xff\xff\x01", 0, "truncated value"},
		{"\xdf\x00\x00\x00\x01\x01\x02", 7, ""},
		{"\x92\x01\x91\xc0", 4, ""},
		{"\xc1", 0, "invalid code 0xc1"},
		{strings.Repeat("\x91", 600) + "\x01", 0, "nested too deeply"},
	} {
		n, err := ValueLen([]byte(c.b))
		if c.fail != "" {
			if err == nil || err.Error() != c.fail {
				t.Fatalf("% x: %d %v, want error %q", c.b, n, err, c.fail)
			}
			continue
		}
		if err != nil || n != c.n {
			t.Fatalf("% x: %d %v, want %d", c.b, n, err, c.n)
		}
	}
}

func TestMapValue(t *testing.T) {
	run, err := Marshal(RunImported{Run: LabRun{RunID: "r1", Topic: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := MapValue(run, "run")
	if !ok {
		t.Fatalf("no run in % x", run)
	}
	var got LabRun
	if err := Unmarshal(v, &got); err != nil || got.RunID != "r1" || got.Topic != "t" {
		t.Fatalf("run value decodes to %+v, %v", got, err)
	}
	for _, c := range []struct {
		name string
		b    string
		v    string // "" when refused
	}{
		{"fixmap", "\x82\xa1a\x01\xa3run\xa2xy", "\xa2xy"},
		{"map16", "\xde\x00\x01\xa3run\x92\x01\x02", "\x92\x01\x02"},
		{"map32", "\xdf\x00\x00\x00\x01\xa3run\xc0", "\xc0"},
		{"str8 key", "\x81\xd9\x03run\x05", "\x05"},
		{"absent", "\x81\xa1a\x01", ""},
		{"twice", "\x82\xa3run\x01\xa3run\x02", ""},
		{"int key", "\x82\x01\x01\xa3run\x02", ""},
		{"not a map", "\x92\xa3run\x01", ""},
		{"trailing bytes", "\x81\xa3run\x01\x01", ""},
		{"truncated value", "\x81\xa3run\xa3ab", ""},
		{"fewer pairs than declared", "\x82\xa3run\x01", ""},
		{"empty", "", ""},
	} {
		v, ok := MapValue([]byte(c.b), "run")
		if ok != (c.v != "") || string(v) != c.v {
			t.Errorf("%s: % x %v, want % x", c.name, v, ok, c.v)
		}
	}
}

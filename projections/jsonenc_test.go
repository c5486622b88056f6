package projections

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

var trickyStrings = []string{"", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\b\f\n\r\t", "<html> & 'x'", "\u2028\u2029", "bad utf8 \xff\xfe", "ünïcödé ✓ 🎬", "\x7f del"}

// TestEncodersMatchEncodingJSON holds the hand-written encoders to the
// bytes encoding/json (HTML escaping off) produces.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	check := func(name string, got []byte, err error, v any) {
		t.Helper()
		want, werr := jsonLine(v)
		if err != nil || werr != nil {
			if (err == nil) != (werr == nil) {
				t.Fatalf("%s: error %v, encoding/json %v", name, err, werr)
			}
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	for _, s := range trickyStrings {
		got := appendString(nil, s)
		want, _ := jsonLine(s)
		if !bytes.Equal(got, want[:len(want)-1]) {
			t.Fatalf("string %q: got %s want %s", s, got, want)
		}
	}
	n := 0
	for ev := range Workload(WorkloadMixedLab, 3, 3000) {
		p, err := ev.Decode()
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *events.FeedbackSubmitted:
			p.Entry.Topic = trickyStrings[n%len(trickyStrings)]
			if n%5 == 0 {
				p.Entry.Answers = json.RawMessage(" { \"q1\" : \"yes\" } ")
				p.Entry.Extra = json.RawMessage(`[1, 2]`)
				p.Entry.Reports = &events.FeedbackReports{ScorePath: "/a/score.json"}
				v := 1.5
				p.Entry.AutoMetricsSnapshot = &events.AutoMetricsSnapshot{MeanDriftMs: &v}
				p.Entry.Tags = []string{}
			}
			if n%5 == 1 {
				v, r := 0.8, 90
				p.Entry.AutoMetricsSnapshot = &events.AutoMetricsSnapshot{CaptionOverall: &r, CaptionCoverageRatio: &v, Read: &events.MetricsRead{Caption: true}}
			}
			got, err := appendFeedbackEntry(nil, &p.Entry)
			check("feedback", got, err, &p.Entry)
		case *events.RunImported:
			p.Run.Topic = trickyStrings[n%len(trickyStrings)]
			if n%3 == 0 {
				v := 0.25
				p.Run.AutoMetricsSummary = &events.AutoMetricsSummary{MaxDriftMs: &v, SyncLabel: "ok"}
				p.Run.Reports = &events.RunReports{Sync: "s.json"}
				p.Run.Fingerprint.Script = &events.FileStat{SizeBytes: 3, MtimeMs: 1700000000123, MtimeNs: 1700000000123456789 + int64(n)}
			}
			if n%3 == 1 {
				v := 12.5
				p.Run.AutoMetricsSummary = &events.AutoMetricsSummary{MeanDriftMs: &v, Read: &events.MetricsRead{Sync: true, Caption: n%2 == 0}}
				p.Run.Reports = &events.RunReports{SyncReportPath: "/a/sync-report.json"}
			}
			got, err := appendLabRun(nil, &p.Run)
			check("run", got, err, &p.Run)
		case *events.ExperimentCreated:
			p.Experiment.Name = trickyStrings[n%len(trickyStrings)]
			if n%2 == 0 {
				p.Experiment.Variants, p.Experiment.Questions = nil, nil
			}
			got, err := appendLabExperiment(nil, &p.Experiment)
			check("experiment", got, err, &p.Experiment)
			// The sparse shape, with and without the values it omits.
			x := p.Experiment
			x.Sparse = true
			if n%3 == 0 {
				x.Hypothesis, x.Topic = "", ""
				x.Winner = &events.Winner{VariantID: "baseline"}
			} else {
				x.Winner = &events.Winner{VariantID: "v", Reason: trickyStrings[n%len(trickyStrings)]}
			}
			got, err = appendLabExperiment(nil, &x)
			check("sparse experiment", got, err, &x)
		case *events.ExperimentSubmitted:
			got, err := appendLabExperiment(nil, &p.Experiment)
			check("submitted", got, err, &p.Experiment)
		}
		if ev.Req != "" {
			l := &IdempotencyLine{RequestID: ev.Req, Type: "x", EntityID: trickyStrings[n%len(trickyStrings)], CreatedAt: "t", Response: ev.Resp}
			got, err := appendIdempotencyLine(nil, l)
			check("idempotency", got, err, l)
		}
		l := &SessionEventLine{Seq: ev.Seq, ID: ev.ID, Type: ev.Type, CreatedAt: "c", RequestID: ev.Req, Data: json.RawMessage(`{"a":1}`)}
		check("session event", appendSessionEventLine(nil, l), nil, l)
		n++
	}
	// Invalid raw JSON is an error, as with encoding/json.
	if _, err := appendFeedbackEntry(nil, &events.FeedbackEntry{Answers: json.RawMessage("{bad")}); err == nil {
		t.Fatal("invalid answers encoded without error")
	}
}

func TestValidIDMatchesHome(t *testing.T) {
	long := strings.Repeat("a", 128)
	for _, id := range []string{"", ".", "..", "...", "a", "lab_1", "conv b", "../x", "a/b", "x\x00", "ü", long, long + "a", "A-Z_0.9", "-", "\n"} {
		if got, want := validID(id), home.ValidateID(id) == nil; got != want {
			t.Errorf("validID(%q) = %v, home.ValidateID says %v", id, got, want)
		}
	}
}

func TestFastDecodeMatchesReflective(t *testing.T) {
	fast := 0
	check := func(ev *events.Event) {
		t.Helper()
		want, werr := ev.Decode()
		got, gerr := decodePayload(ev)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("seq %d: fast %#v (%v), reflective %#v (%v)", ev.Seq, got, gerr, want, werr)
		}
		if m := (&mp{b: ev.Data}); fastFeedbackSubmitted(m) != nil && m.done() {
			fast++
		}
	}
	for ev := range Workload(WorkloadMixedLab, 17, 2000) {
		check(ev)
	}
	for _, x := range []events.LabExperiment{
		{},
		{ExperimentID: "e", Variants: []events.Variant{}, Questions: []events.Question{{ID: "q"}}},
		{ExperimentID: "w", Winner: &events.Winner{VariantID: "v"}, Answers: json.RawMessage(`{}`)},
		{ExperimentID: "s", Sparse: true, Variants: []events.Variant{}, Winner: &events.Winner{VariantID: "v"}},
		{ExperimentID: "t", Sparse: true, Hypothesis: "h", Questions: []events.Question{}},
	} {
		check(events.MustNew("lab_x", &events.ExperimentCreated{Experiment: x}))
		check(events.MustNew("lab_x", &events.ExperimentUpdated{Experiment: x}))
		check(events.MustNew("lab_x", &events.ExperimentSubmitted{Experiment: x}))
		check(events.MustNew("lab_x", &events.ExperimentSubmitted{Experiment: x, Feedback: []events.FeedbackEntry{{ID: "f"}, {}}}))
	}
	one, half := 1, 0.5
	for _, r := range []events.LabRun{
		{},
		{RunID: "r", Fingerprint: &events.RunFingerprint{}, AutoMetricsSummary: &events.AutoMetricsSummary{}},
		{RunID: "r", Fingerprint: &events.RunFingerprint{Script: &events.FileStat{SizeBytes: -1, MtimeMs: 1 << 40}}, AutoMetricsSummary: &events.AutoMetricsSummary{CaptionOverall: &one, SyncLabel: "ok"}},
		{RunID: "f", AutoMetricsSummary: &events.AutoMetricsSummary{MeanDriftMs: &half}, Reports: &events.RunReports{Sync: "s"}},
		{RunID: "n", Fingerprint: &events.RunFingerprint{Video: &events.FileStat{Path: "v", SizeBytes: 1, MtimeMs: 1700000000123, MtimeNs: 1700000000123456789}}},
	} {
		check(events.MustNew("lab_x", &events.RunImported{Run: r}))
	}
	zero, big := 0, 100
	for _, e := range []events.FeedbackEntry{
		{},
		{SchemaVersion: 1, ID: "x", Ratings: &events.Ratings{Overall: &zero, Script: &big, Visuals: &zero, Motion: &big, Captions: &zero}, Tags: []string{"", "b"}},
		{ID: "y", Answers: json.RawMessage(`{"a":1}`)},
		{ID: "z", Reports: &events.FeedbackReports{ScorePath: "s"}, Topic: "\xff"},
	} {
		check(events.MustNew("lab_x", &events.FeedbackSubmitted{Entry: e}))
	}
	// Surprises fall back: garbage, trailing bytes, another version.
	for _, b := range [][]byte{{0x81, 0xa5, 'e', 'n', 't', 'r', 'y', 0x80, 0x00}, {0xc1}, {0x81, 0xa5, 'e', 'n', 't', 'r', 'y', 0x81, 0xa2, 'i', 'd', 0xdb, 0xff, 0xff, 0xff, 0xff}, {0x81, 0xa5, 'e', 'n', 't', 'r', 'y', 0x81, 0xa4, 't', 'a', 'g', 's', 0xdd, 0x7f, 0xff, 0xff, 0xff}} {
		if m := (&mp{b: b}); fastFeedbackSubmitted(m) != nil && m.done() {
			t.Fatalf("% x accepted", b)
		}
	}
	// A nil where a nested value belongs falls back too, whatever reads it.
	str := func(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }
	in := func(key string, v []byte) []byte { return append(append([]byte{0x81}, str(key)...), v...) }
	nilIn := func(keys ...string) []byte {
		v := []byte{0xc0}
		for i := len(keys) - 1; i >= 0; i-- {
			v = in(keys[i], v)
		}
		return v
	}
	for _, c := range []struct {
		name string
		b    []byte
		fast func(*mp) bool
	}{
		{"ratings", nilIn("entry", "ratings"), func(m *mp) bool { return fastFeedbackSubmitted(m) != nil }},
		{"rating", nilIn("entry", "ratings", "hook"), func(m *mp) bool { return fastFeedbackSubmitted(m) != nil }},
		{"tags", nilIn("entry", "tags"), func(m *mp) bool { return fastFeedbackSubmitted(m) != nil }},
		{"notes", nilIn("entry", "notes"), func(m *mp) bool { return fastFeedbackSubmitted(m) != nil }},
		{"fingerprint", nilIn("run", "fingerprint"), func(m *mp) bool { return fastRunImported(m) != nil }},
		{"file stat", nilIn("run", "fingerprint", "video"), func(m *mp) bool { return fastRunImported(m) != nil }},
		{"metrics", nilIn("run", "autoMetricsSummary"), func(m *mp) bool { return fastRunImported(m) != nil }},
		{"winner", nilIn("experiment", "winner"), func(m *mp) bool { return fastExperimentPayload(m) != nil }},
		{"feedback", nilIn("feedback"), func(m *mp) bool { return fastExperimentSubmitted(m) != nil }},
	} {
		if m := (&mp{b: c.b}); c.fast(m) && m.done() {
			t.Fatalf("nil %s (% x) accepted", c.name, c.b)
		}
	}
	if fast < 1000 {
		t.Fatalf("fast path taken %d times only", fast)
	}
}

// FuzzFastDecode: whatever the payload bytes, the fast path never panics
// and, when it accepts them, agrees with the reflective decoder.
func FuzzFastDecode(f *testing.F) {
	for ev := range Workload(WorkloadMixedLab, 5, 40) {
		f.Add(ev.Type, []byte(ev.Data))
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		ev := &events.Event{V: 1, ID: "x", Type: typ, Data: data}
		got, gerr := decodePayload(ev)
		want, werr := ev.Decode()
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("fast %v, reflective %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("fast %#v\nreflective %#v", got, want)
		}
	})
}

func TestISOTimeMatchesEvents(t *testing.T) {
	for _, ms := range []int64{0, 1, 999, 1000, -1, -1001, 1770379200123, 253402300799999, 253402300800000, -62135596800000, -62135596800001, 1 << 50, -(1 << 50)} {
		if got, want := isoTime(ms), events.FormatISO(ms); got != want {
			t.Errorf("isoTime(%d) = %s, want %s", ms, got, want)
		}
	}
	// Every century boundary and leap rule of 1970–9999 (the fast path's
	// whole range), a step of about 29.6 days so every day of the month
	// and time of day comes round.
	for ms := int64(0); ms < 253402300800000; ms += 2559999997 {
		if got, want := isoTime(ms), events.FormatISO(ms); got != want {
			t.Fatalf("isoTime(%d) = %s, want %s", ms, got, want)
		}
	}
	for _, day := range []string{"2000-02-29", "2100-02-28", "2100-03-01", "2400-02-29", "9999-12-31", "1970-01-01", "1972-12-31"} {
		d, err := time.Parse("2006-01-02", day)
		if err != nil {
			t.Fatal(err)
		}
		for _, ms := range []int64{d.UnixMilli(), d.UnixMilli() + 86399999} {
			if got, want := isoTime(ms), events.FormatISO(ms); got != want {
				t.Fatalf("isoTime(%d) = %s, want %s", ms, got, want)
			}
		}
	}
	for ms := int64(1770379200000); ms < 1770379200000+86400000*400; ms += 7777777 {
		if got, want := isoTime(ms), events.FormatISO(ms); got != want {
			t.Fatalf("isoTime(%d) = %s, want %s", ms, got, want)
		}
	}
}

// TestNeedsEscape8 checks the eight-byte test against the byte rule for
// every byte value at every position, and with two bytes set at once.
func TestNeedsEscape8(t *testing.T) {
	special := func(b byte) bool { return b < 0x20 || b == '"' || b == '\\' || b >= 0x80 }
	pack := func(bs [8]byte) uint64 {
		var x uint64
		for i := 7; i >= 0; i-- {
			x = x<<8 | uint64(bs[i])
		}
		return x
	}
	for pos := 0; pos < 8; pos++ {
		for v := 0; v < 256; v++ {
			bs := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			bs[pos] = byte(v)
			if got, want := needsEscape8(pack(bs)), special(byte(v)); got != want {
				t.Fatalf("byte %#x at %d: needsEscape8 = %v, want %v", v, pos, got, want)
			}
			for pos2 := 0; pos2 < 8; pos2++ {
				if pos2 == pos {
					continue
				}
				for _, w := range []byte{0, 0x1f, 0x20, '!', '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xff} {
					bs2 := bs
					bs2[pos2] = w
					want := special(byte(v)) || special(w)
					if got := needsEscape8(pack(bs2)); got != want {
						t.Fatalf("bytes %#x at %d, %#x at %d: needsEscape8 = %v, want %v", v, pos, w, pos2, got, want)
					}
				}
			}
		}
	}
}

// TestAppendStringMatchesEncodingJSON puts every kind of byte at every
// offset of strings long enough for the eight-byte path.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	base := "The quick brown fox jumps over the lazy dog, 0123456789"
	inserts := []string{"\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "<>&", "😀"}
	for _, ins := range inserts {
		for at := 0; at <= len(base); at++ {
			s := base[:at] + ins + base[at:]
			want, err := jsonLine(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(appendString(nil, s)) + "\n"; got != string(want) {
				t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
			}
		}
	}
}

// TestFileStatNodeMtime: a FileStat with nanoseconds is written with
// Node's mtimeMs as JSON.stringify prints it (node 22: statSync of a file
// touched at 1700000000.123456789 gives 1700000000123.4568); without
// nanoseconds (events written before issue 28 A3) as the whole
// milliseconds it always was.
func TestFileStatNodeMtime(t *testing.T) {
	for _, c := range []struct {
		f    events.FileStat
		want string
	}{
		{events.FileStat{SizeBytes: 1, MtimeMs: 1700000000123, MtimeNs: 1700000000123456789}, `{"sizeBytes":1,"mtimeMs":1700000000123.4568}`},
		{events.FileStat{SizeBytes: 1, MtimeMs: 1700000001000, MtimeNs: 1700000001000000000}, `{"sizeBytes":1,"mtimeMs":1700000001000}`},
		{events.FileStat{SizeBytes: 1, MtimeMs: 1700000000123}, `{"sizeBytes":1,"mtimeMs":1700000000123}`},
		{events.FileStat{SizeBytes: 0, MtimeMs: -1, MtimeNs: -500000}, `{"sizeBytes":0,"mtimeMs":-0.5}`},
	} {
		if got := string(appendFileStat(nil, &c.f)); got != c.want {
			t.Fatalf("%+v: got %s, want %s", c.f, got, c.want)
		}
	}
}

package labapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func entryLine(id, session string) string {
	return `{"schemaVersion":1,"id":"` + id + `","createdAt":"2026-02-06T00:00:00.000Z","sessionId":"` + session + `","ratings":{"overall":50}}` + "\n"
}

func ids(t *testing.T, p *FeedbackPage) []string {
	t.Helper()
	var out []string
	for _, it := range p.Items {
		var e struct{ ID string }
		if err := json.Unmarshal(it, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e.ID)
	}
	return out
}

func TestPollFeedbackRules(t *testing.T) {
	a, b, c := entryLine("a", "s1"), entryLine("b", "s2"), entryLine("c", "s1")
	bad := "{not json}\n"
	wrongType := `{"schemaVersion":1,"id":"x","createdAt":"t","ratings":{"overall":1.5}}` + "\n"
	outOfRange := `{"schemaVersion":1,"id":"y","createdAt":"t","ratings":{"overall":101}}` + "\n"
	unknownField := `{"schemaVersion":1,"id":"z","createdAt":"t","bogus":1}` + "\n"
	partial := `{"schemaVersion":1,"id":"p"`
	la, lb := len(a), len(b)
	tests := []struct {
		name      string
		content   *string // nil: no file
		since     string
		session   string
		limit     int
		wantIDs   []string
		wantNext  string
		wantCode  string
		wantSize  any
		wantInMsg string
	}{
		{name: "missing store", content: nil, since: "0", wantNext: "0"},
		{name: "missing store, empty since", content: nil, since: "", wantNext: "0"},
		{name: "missing store, since past", content: nil, since: "5", wantCode: CodeInvalidCursor},
		{name: "empty file", content: ptr(""), since: "0", wantNext: "0"},
		{name: "all", content: ptr(a + b + c), since: "0", wantIDs: []string{"a", "b", "c"}, wantNext: strconv.Itoa(la + lb + len(c))},
		{name: "exclusive cursor", content: ptr(a + b + c), since: strconv.Itoa(la), wantIDs: []string{"b", "c"}, wantNext: strconv.Itoa(la + lb + len(c))},
		{name: "at end", content: ptr(a + b), since: strconv.Itoa(la + lb), wantNext: strconv.Itoa(la + lb)},
		{name: "misaligned since=1", content: ptr(a + b), since: "1", wantCode: CodeInvalidCursor, wantInMsg: "not aligned"},
		{name: "beyond end", content: ptr(a), since: strconv.Itoa(la + 1), wantCode: CodeInvalidCursor, wantSize: float64(la)},
		{name: "huge cursor", content: ptr(a), since: "99999999999999999999999", wantCode: CodeInvalidCursor},
		{name: "not digits", content: ptr(a), since: "abc", wantCode: CodeInvalidCursor},
		{name: "negative", content: ptr(a), since: "-1", wantCode: CodeInvalidCursor},
		{name: "plus sign", content: ptr(a), since: "+3", wantCode: CodeInvalidCursor},
		{name: "float", content: ptr(a), since: "1.0", wantCode: CodeInvalidCursor},
		{name: "partial trailing line", content: ptr(a + partial), since: "0", wantIDs: []string{"a"}, wantNext: strconv.Itoa(la)},
		{name: "only partial", content: ptr(partial), since: "0", wantNext: "0"},
		{name: "malformed complete lines consumed", content: ptr(bad + a + wrongType + outOfRange + unknownField + "\n"), since: "0", wantIDs: []string{"a"},
			wantNext: strconv.Itoa(len(bad + a + wrongType + outOfRange + unknownField + "\n"))},
		{name: "session filter keeps cursor moving", content: ptr(a + b + c), since: "0", session: "s2", wantIDs: []string{"b"}, wantNext: strconv.Itoa(la + lb + len(c))},
		{name: "session filter none match", content: ptr(a + c), since: "0", session: "nope", wantNext: strconv.Itoa(la + len(c))},
		{name: "limit stops after last returned", content: ptr(a + b + c), since: "0", limit: 1, wantIDs: []string{"a"}, wantNext: strconv.Itoa(la)},
		{name: "limit with filter", content: ptr(a + b + c), since: "0", session: "s1", limit: 1, wantIDs: []string{"a"}, wantNext: strconv.Itoa(la)},
		{name: "limit second page", content: ptr(a + b + c), since: strconv.Itoa(la), session: "s1", limit: 1, wantIDs: []string{"c"}, wantNext: strconv.Itoa(la + lb + len(c))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "feedback.jsonl")
			if tc.content != nil {
				if err := os.WriteFile(p, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			page, err := PollFeedback(p, tc.since, tc.session, tc.limit)
			if tc.wantCode != "" {
				ae, ok := err.(*APIError)
				if !ok || ae.Code != tc.wantCode {
					t.Fatalf("err = %v, want %s", err, tc.wantCode)
				}
				if ae.Fix() == "" {
					t.Fatalf("no fix in %v", ae)
				}
				if tc.wantSize != nil && ae.Context["sizeBytes"] != int64(tc.wantSize.(float64)) {
					t.Fatalf("sizeBytes = %v, want %v", ae.Context["sizeBytes"], tc.wantSize)
				}
				if tc.wantInMsg != "" && !strings.Contains(ae.Message, tc.wantInMsg) {
					t.Fatalf("message %q lacks %q", ae.Message, tc.wantInMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(t, page); strings.Join(got, ",") != strings.Join(tc.wantIDs, ",") {
				t.Fatalf("ids = %v, want %v", got, tc.wantIDs)
			}
			if page.NextCursor != tc.wantNext {
				t.Fatalf("nextCursor = %q, want %q", page.NextCursor, tc.wantNext)
			}
			if page.Items == nil {
				t.Fatal("items is nil (must encode as [])")
			}
			if tc.name != "malformed complete lines consumed" && len(page.Malformed) != 0 {
				t.Fatalf("malformed %+v", page.Malformed)
			}
		})
	}
}

// TestPollFeedbackReportsMalformedLines: the complete lines a poll steps
// over because they are not entries are listed with their offsets and a
// reason (seed 000 rule 5 consumes them; this API never does so
// silently), whatever the session filter; a clean page has no malformed
// key at all.
func TestPollFeedbackReportsMalformedLines(t *testing.T) {
	a, b := entryLine("a", "s1"), entryLine("b", "s2")
	bad := "{not json}\n"
	unknownField := `{"schemaVersion":1,"id":"z","createdAt":"t","bogus":1}` + "\n"
	content := a + bad + b + unknownField + "\n" + `{"partial`
	p := filepath.Join(t.TempDir(), "feedback.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	page, err := PollFeedback(p, "0", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	o1 := int64(len(a))
	o2 := o1 + int64(len(bad)) + int64(len(b))
	o3 := o2 + int64(len(unknownField))
	want := []MalformedLine{
		{Offset: o1, End: o1 + int64(len(bad)), Reason: "not a feedback entry (parse error)"},
		{Offset: o2, End: o3, Reason: "not a feedback entry (parse error)"},
		{Offset: o3, End: o3 + 1, Reason: "empty line"},
	}
	if fmt.Sprint(page.Malformed) != fmt.Sprint(want) || page.NextCursor != strconv.FormatInt(o3+1, 10) || len(page.Items) != 1 {
		t.Fatalf("page %+v, want malformed %+v", page, want)
	}
	clean, err := PollFeedback(p, "0", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(clean); strings.Contains(string(raw), "malformed") {
		t.Fatalf("clean page %s", raw)
	}
}

func ptr(s string) *string { return &s }

// TestPollFeedbackLimitNeverDrops pages through 1,000 entries of two
// sessions with every limit from 1 to 7 and checks each entry of the
// session comes back exactly once, in order.
func TestPollFeedbackLimitNeverDrops(t *testing.T) {
	var sb strings.Builder
	var want []string
	for i := range 1000 {
		s := "s" + strconv.Itoa(i%3)
		id := "e" + strconv.Itoa(i)
		if s == "s1" {
			want = append(want, id)
		}
		sb.WriteString(entryLine(id, s))
		if i%97 == 0 {
			sb.WriteString("garbage line\n")
		}
	}
	p := filepath.Join(t.TempDir(), "feedback.jsonl")
	os.WriteFile(p, []byte(sb.String()), 0o600)
	for limit := 1; limit <= 7; limit++ {
		var got []string
		cur := "0"
		for range 2000 {
			page, err := PollFeedback(p, cur, "s1", limit)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(t, page)...)
			if page.NextCursor == cur {
				break
			}
			cur = page.NextCursor
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("limit %d: got %d ids, want %d", limit, len(got), len(want))
		}
		if cur != strconv.Itoa(sb.Len()) {
			t.Fatalf("limit %d: final cursor %s, want %d", limit, cur, sb.Len())
		}
	}
}

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]int{"": 0, "0": 0, "-5": 0, "abc": 0, "10": 10, "10abc": 10, "500": 500, "501": 500, "99999999999999999999": 500, " 7 ": 7} {
		if got := parseLimit(in); got != want {
			t.Errorf("parseLimit(%q) = %d, want %d", in, got, want)
		}
	}
}

// parseRatings reads each rating as json.Unmarshal reads a number, and
// refuses what is not an integer 0–100 (the cases pin the set it accepts).
func TestParseRatingsNumbers(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int // -1: refused
	}{
		{"0", 0}, {"100", 100}, {"50.0", 50}, {"1e2", 100}, {"5E1", 50}, {"-0", 0}, {"0.5e2", 50},
		{"50.5", -1}, {"-1", -1}, {"101", -1}, {"1e400", -1}, {"-1e400", -1}, {"true", -1}, {`"5"`, -1}, {"[5]", -1}, {"{}", -1},
	} {
		r, err := parseRatings(json.RawMessage(`{"overall":`+tc.raw+`}`), "ratings")
		switch {
		case tc.want < 0 && err == nil:
			t.Errorf("%s: accepted, want refused", tc.raw)
		case tc.want >= 0 && (err != nil || r == nil || r.Overall == nil || *r.Overall != tc.want):
			t.Errorf("%s: %+v, %v; want %d", tc.raw, r, err, tc.want)
		}
	}
	if r, err := parseRatings(json.RawMessage(`{"overall":null,"hook":7}`), "ratings"); err != nil || r.Overall != nil || *r.Hook != 7 {
		t.Errorf("null and a second key: %+v, %v", r, err)
	}
	if _, err := parseRatings(json.RawMessage(`{"tone":7}`), "ratings"); err == nil {
		t.Error("an unknown rating was accepted")
	}
}

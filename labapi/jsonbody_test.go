package labapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// bodyHashBefore is bodyHash as it was before bodies were read in place
// (every body through a map and json.Marshal): the hashes stored in the
// log were made by it, and a retry after an upgrade is compared with them.
func bodyHashBefore(route string, body []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		fields = nil
	}
	canon := body
	if fields != nil {
		delete(fields, "requestId")
		delete(fields, "request_id")
		if b, err := json.Marshal(fields); err == nil {
			canon = b
		}
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, body) == nil {
			canon = buf.Bytes()
		}
	}
	h := sha256.New()
	h.Write([]byte(route))
	h.Write([]byte{0})
	h.Write(canon)
	return "sha256-" + hex.EncodeToString(h.Sum(nil))
}

// bodyGen writes random JSON in every form a client may send: odd white
// space, keys in any order, escapes and raw UTF-8, the characters
// json.Marshal escapes for HTML, numbers in every notation, nesting, and
// keys that repeat, fold to a field name or need escaping.
type bodyGen struct{ r *rand.Rand }

func (g bodyGen) ws() string {
	return [...]string{"", "", "", " ", "\n", "\t", "  \r\n ", " \n\t"}[g.r.IntN(8)]
}

var genKeys = []string{
	"notes", "runId", "topic", "tags", "ratings", "answers", "experimentId", "variantId",
	"requestId", "request_id", "RequestId", "REQUEST_ID", "Notes", "NOTES", "runid", "x", "a", "b", "z1", "_", "",
	"a b", "a<b", "k&", "k>", "ключ", "caf\u00e9", "\u2028", `q\"uote`, `back\\slash`, `\u0061`, `n\u006Ftes`, "\u212aey", "overall", "hook", "sync",
}

var genStrings = []string{
	"", "plain", "with space", "tab\\there", `\"quoted\"`, `\\`, `\/`, `\u00e9`, `\u003c`, "<b>&amp;</b>",
	"\u2028\u2029", `\u2028`, "日本語", "emoji \U0001F600", `\ud83d\ude00`, `\ud800`, "\xff\xfe", "a\u00a0b", `\b\f\n\r\t`, "  padded  ",
}

var genNumbers = []string{
	"0", "-0", "1", "42", "-17", "100", "101", "3.14", "50.0", "1e2", "1E2", "5e+1", "5E-1", "0.5e2", "-1e400", "1e400",
	"12345678901234567890", "0.000001", "1.0e0",
}

func (g bodyGen) str() string { return `"` + genStrings[g.r.IntN(len(genStrings))] + `"` }

func (g bodyGen) value(depth int) string {
	switch n := g.r.IntN(10); {
	case n < 3:
		return g.str()
	case n < 5:
		return genNumbers[g.r.IntN(len(genNumbers))]
	case n == 5:
		return [...]string{"true", "false", "null"}[g.r.IntN(3)]
	case n == 6 && depth < 3:
		var b strings.Builder
		b.WriteString("[" + g.ws())
		for i := range g.r.IntN(4) {
			if i > 0 {
				b.WriteString(g.ws() + "," + g.ws())
			}
			b.WriteString(g.value(depth + 1))
		}
		b.WriteString(g.ws() + "]")
		return b.String()
	case depth < 3:
		return g.object(depth+1, 4)
	}
	return g.str()
}

func (g bodyGen) object(depth, maxMembers int) string {
	var b strings.Builder
	b.WriteString("{" + g.ws())
	for i := range g.r.IntN(maxMembers + 1) {
		if i > 0 {
			b.WriteString(g.ws() + "," + g.ws())
		}
		b.WriteString(`"` + genKeys[g.r.IntN(len(genKeys))] + `"` + g.ws() + ":" + g.ws() + g.value(depth))
	}
	b.WriteString(g.ws() + "}")
	return b.String()
}

// body is a request body: mostly objects, some other JSON and some not
// JSON at all.
func (g bodyGen) body() string {
	switch n := g.r.IntN(20); {
	case n == 0:
		return g.ws() + g.value(0) + g.ws()
	case n == 1:
		return g.object(0, 6)[1:] // cut
	case n == 2:
		return g.object(0, 6) + g.ws() + "x"
	}
	return g.ws() + g.object(0, 10) + g.ws()
}

// bodyCases are bodies written by hand beside the generated ones.
var bodyCases = []string{
	`{}`, ` { } `, `{"notes":"n"}`, `{"notes":"n","requestId":"r"}`, `{"requestId":"r","notes":"n"}`,
	`{"b":1,"a":2,"B":3,"_":4,"A":5}`, `{"notes":"<&>"}`, "{\"notes\":\"\u2028\u2029\"}", `{"notes":"\u2028"}`,
	`{"n":[1, 2 ,3 ], "o" : { "k" : "v" , "l":[ ]} }`, `{"x":1e2,"y":-0,"z":0.5e2,"w":1E+2}`,
	`{"notes":"a","notes":"b"}`, `{"RequestId":"r","notes":"n"}`, `{"n\u006ftes":"x"}`, `{"ключ":"v"}`,
	`[1,2]`, `"str"`, `42`, `null`, `{"a":1}x`, `{"a":`, `not json`, "{\"a\":\"\xff\"}",
	`{"ratings":{"overall":80,"hook":null},"tags":["a"," b "],"answers":{"q": "a" }}`,
}

// TestBodyHashMatchesTheMapHash: the hash of every body, read in place or
// not, is byte for byte the hash stored before bodies were read in place.
func TestBodyHashMatchesTheMapHash(t *testing.T) {
	g := bodyGen{rand.New(rand.NewPCG(1, 26))}
	bodies := append([]string(nil), bodyCases...)
	for range 30000 {
		bodies = append(bodies, g.body())
	}
	plain := 0
	for _, b := range bodies {
		jb := parseBody([]byte(b))
		var fields map[string]json.RawMessage
		if jb.plain {
			plain++
		} else {
			fields = bodyFields(jb.raw)
		}
		got, want := bodyHash("POST /api/feedback", jb, fields), bodyHashBefore("POST /api/feedback", []byte(b))
		if got != want {
			canon := string(jb.canonical(nil))
			t.Fatalf("body %q (plain %v): hash %s, stored hashes are %s (canonical %q)", b, jb.plain, got, want, canon)
		}
	}
	if plain < len(bodies)/5 {
		t.Fatalf("only %d of %d bodies took the in-place path", plain, len(bodies))
	}
	t.Logf("%d bodies, %d read in place", len(bodies), plain)
}

// TestRequestIDOfAPlainBody: the request id read from a plain body's
// members is the one read through the map, error or not.
func TestRequestIDOfAPlainBody(t *testing.T) {
	g := bodyGen{rand.New(rand.NewPCG(2, 26))}
	bodies := append([]string(nil), bodyCases...)
	for range 20000 {
		bodies = append(bodies, g.body())
	}
	r := httptest.NewRequest("POST", "/api/feedback", nil)
	for _, b := range bodies {
		jb := parseBody([]byte(b))
		if !jb.plain {
			continue
		}
		sameRequestID(t, r, jb)
	}
}

// sameRequestID fails t unless the request id read from the plain body
// jb's members is the one read through the map, error or not; it returns
// that error.
func sameRequestID(t testing.TB, r *http.Request, jb *jsonBody) error {
	t.Helper()
	got, gotErr := requestID(r, jb, nil)
	want, wantErr := requestID(r, &jsonBody{raw: jb.raw}, bodyFields(jb.raw))
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("body %q: request id %q, %v; through the map %q, %v", jb.raw, got, gotErr, want, wantErr)
	}
	return gotErr
}

// TestFeedbackDecodeMatchesUnmarshal: a feedback body filled from its
// members is what json.Unmarshal fills, and a body it cannot fill so is
// left to json.Unmarshal; ratings read in place are read as through the
// map.
func TestFeedbackDecodeMatchesUnmarshal(t *testing.T) {
	g := bodyGen{rand.New(rand.NewPCG(3, 26))}
	bodies := append([]string(nil), bodyCases...)
	for range 30000 {
		bodies = append(bodies, g.body())
	}
	// Feedback-shaped bodies, so the fields are there often.
	fields := []string{"notes", "runId", "topic", "tags", "ratings", "answers", "experimentId", "variantId", "requestId", "Notes", "other"}
	for range 20000 {
		var b strings.Builder
		b.WriteString("{" + g.ws())
		for i := range g.r.IntN(6) {
			if i > 0 {
				b.WriteString(",")
			}
			k := fields[g.r.IntN(len(fields))]
			v := g.value(1)
			switch {
			case k == "tags" && g.r.IntN(2) == 0:
				v = "[" + g.str() + "," + g.ws() + g.str() + "]"
			case k == "ratings" && g.r.IntN(2) == 0:
				v = fmt.Sprintf(`{"overall":%s,%s"hook" : %s}`, genNumbers[g.r.IntN(len(genNumbers))], g.ws(), [...]string{"null", "7", "5.5", `"x"`}[g.r.IntN(4)])
			case k != "ratings" && k != "answers" && k != "tags" && g.r.IntN(3) > 0:
				v = g.str()
			}
			b.WriteString(`"` + k + `"` + g.ws() + ":" + g.ws() + v)
		}
		b.WriteString(g.ws() + "}")
		bodies = append(bodies, b.String())
	}
	r := httptest.NewRequest("POST", "/api/feedback", nil)
	filled := 0
	for _, body := range bodies {
		jb := parseBody([]byte(body))
		if !jb.plain {
			continue
		}
		if _, err := requestID(r, jb, nil); err != nil {
			continue // refused before the body is decoded
		}
		if sameAsUnmarshal(t, jb) {
			filled++
		}
	}
	if filled < 5000 {
		t.Fatalf("only %d bodies filled in place", filled)
	}
	t.Logf("%d bodies, %d filled in place", len(bodies), filled)
}

// parseRatingsBefore is parseRatings as it was before it read plain
// objects in place: through a map (the order of its errors is the map's),
// each value checked as it still is.
func parseRatingsBefore(raw json.RawMessage) (*events.Ratings, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := &events.Ratings{}
	n := 0
	for k, v := range m {
		slot := ratingSlot(out, k)
		if slot == nil {
			return nil, fmt.Errorf("unknown %s", k)
		}
		if string(v) == "null" {
			continue
		}
		iv, ok := ratingValue(v) // unchanged: the values' check
		if !ok {
			return nil, fmt.Errorf("bad %s", k)
		}
		*slot = &iv
		n++
	}
	if n == 0 {
		return nil, nil
	}
	return out, nil
}

// BenchmarkBodyRead: the request id, the hash and the feedback struct of
// the bench's body (bench/peer.go), read through the map and json.Unmarshal
// as before and in place.
func BenchmarkBodyRead(b *testing.B) {
	body := []byte(`{"notes":"bench","ratings":{"overall":80,"hook":70},"requestId":"b-0001"}`)
	r := httptest.NewRequest("POST", "/api/feedback", nil)
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fields := bodyFields(body)
			if _, err := requestID(r, &jsonBody{raw: body}, fields); err != nil {
				b.Fatal(err)
			}
			bodyHashBefore("POST /api/feedback", body)
			var fb feedbackBody
			if err := decodeJSON(body, &fb); err != nil {
				b.Fatal(err)
			}
			if _, err := parseRatingsBefore(fb.Ratings); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("in-place", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jb := parseBody(body)
			if _, err := requestID(r, jb, nil); err != nil {
				b.Fatal(err)
			}
			bodyHash("POST /api/feedback", jb, nil)
			var fb feedbackBody
			if !fb.decodeMembers(jb.members) {
				b.Fatal("not plain")
			}
			if _, err := parseRatings(fb.Ratings, "ratings"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestWriteRawSharedHeaderValues: writeRaw's header values are shared by
// every answer; a handler that adds to or sets them on one answer changes
// no other.
func TestWriteRawSharedHeaderValues(t *testing.T) {
	a := httptest.NewRecorder()
	writeRaw(a, 200, json.RawMessage(`{"a":1}`))
	a.Header().Add("Cache-Control", "private")
	a.Header().Set("Content-Type", "text/plain")
	b := httptest.NewRecorder()
	writeRaw(b, 201, json.RawMessage(`{"b":2}`))
	if got := b.Header()["Cache-Control"]; !reflect.DeepEqual(got, []string{"no-store"}) {
		t.Fatalf("Cache-Control %q", got)
	}
	if got := b.Header()["Content-Type"]; !reflect.DeepEqual(got, []string{"application/json; charset=utf-8"}) {
		t.Fatalf("Content-Type %q", got)
	}
	if b.Code != 201 || b.Body.String() != "{\"b\":2}\n" {
		t.Fatalf("%d %q", b.Code, b.Body.String())
	}
}

// sameAsUnmarshal fails t unless the feedback fields of the plain body jb,
// filled in place, are what json.Unmarshal fills, with the ratings read as
// through the map; false when they cannot be filled in place (the body
// then takes json.Unmarshal).
func sameAsUnmarshal(t testing.TB, jb *jsonBody) bool {
	t.Helper()
	var got feedbackBody
	if !got.decodeMembers(jb.members) {
		return false
	}
	var want feedbackBody
	if err := json.Unmarshal(jb.raw, &want); err != nil {
		t.Fatalf("body %q: filled in place, json.Unmarshal refuses it: %v", jb.raw, err)
	}
	want.RequestID = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q:\nin place %#v\nUnmarshal %#v", jb.raw, got, want)
	}
	if len(got.Ratings) > 0 {
		r1, e1 := parseRatings(got.Ratings, "ratings")
		r2, e2 := parseRatingsBefore(got.Ratings)
		if !reflect.DeepEqual(r1, r2) || (e1 == nil) != (e2 == nil) {
			t.Fatalf("ratings %s: %+v, %v; through the map %+v, %v", got.Ratings, r1, e1, r2, e2)
		}
	}
	return true
}

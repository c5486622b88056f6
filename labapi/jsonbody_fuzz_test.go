package labapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// FuzzBodyInPlace: for any bytes a client may send, what is read in place
// is what the map and json.Unmarshal read: the stored body hash, the
// request id (or its error) and the feedback fields. A difference would
// let a retry with the same request id be refused as another body, or a
// different body pass as the same one. Seeded with bodyCases; run longer
// with go test ./labapi -run '^$' -fuzz FuzzBodyInPlace.
func FuzzBodyInPlace(f *testing.F) {
	for _, b := range bodyCases {
		f.Add([]byte(b))
	}
	f.Add([]byte(`{"notes":"bench","ratings":{"overall":80,"hook":70},"requestId":"b-0001"}`))
	f.Add([]byte(`{"Notes":"a","notes":"b","NOTES":"c","requestId":"r"}`))
	f.Add([]byte(`{"tags":["a"],"Tags":null,"runId":"x","RUNID":"y"}`))
	r := httptest.NewRequest("POST", "/api/feedback", nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		jb := parseBody(body)
		var fields map[string]json.RawMessage
		if !jb.plain {
			fields = bodyFields(jb.raw)
		}
		if got, want := bodyHash("POST /api/feedback", jb, fields), bodyHashBefore("POST /api/feedback", body); got != want {
			t.Fatalf("body %q (plain %v): hash %s, stored hashes are %s", body, jb.plain, got, want)
		}
		if !jb.plain {
			return
		}
		if sameRequestID(t, r, jb) != nil {
			return
		}
		sameAsUnmarshal(t, jb)
	})
}

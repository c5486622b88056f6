package fuzz

import (
	"net/http"
	"testing"
)

// TestFindingTrailingBracket keeps a finding of the API fuzzing fixed:
// labapi's decodeJSON used json.Decoder.More to look for data after the
// JSON value, which reports false for a closing ']' or '}', so a body like
// {"notes":"x"}] was accepted instead of INVALID_JSON.
func TestFindingTrailingBracket(t *testing.T) {
	a := newAPITarget(t, t.TempDir())
	for _, body := range []string{`{"notes":"x"}]`, `{"notes":"x"}}`} {
		before := a.eng.Log().LastSeq()
		rec := a.post("/api/feedback", "", []byte(body))
		if rec.Code != http.StatusBadRequest || a.eng.Log().LastSeq() != before {
			t.Errorf("body %s: %d %s (appended %d), want 400 INVALID_JSON and nothing appended", body, rec.Code, rec.Body.Bytes(), a.eng.Log().LastSeq()-before)
		}
	}
}

package fuzz

import (
	"net/http"
	"os"
	"testing"
)

// TestFindingTrailingBracket documents a leniency found while fuzzing the
// API: labapi's decodeJSON checks for data after the JSON value with
// json.Decoder.More, which reports false for a closing ']' or '}', so a
// body like {"notes":"x"}] is accepted instead of INVALID_JSON. Opt-in
// (CMLAB_FINDINGS=1) until labapi checks for any non-space byte after the
// value.
func TestFindingTrailingBracket(t *testing.T) {
	if os.Getenv("CMLAB_FINDINGS") == "" {
		t.Skip("known finding, reported to the labapi owner; CMLAB_FINDINGS=1 runs it")
	}
	a := newAPITarget(t, t.TempDir())
	for _, body := range []string{`{"notes":"x"}]`, `{"notes":"x"}}`} {
		before := a.eng.Log().LastSeq()
		rec := a.post("/api/feedback", "", []byte(body))
		if rec.Code != http.StatusBadRequest || a.eng.Log().LastSeq() != before {
			t.Errorf("body %s: %d %s (appended %d), want 400 INVALID_JSON and nothing appended", body, rec.Code, rec.Body.Bytes(), a.eng.Log().LastSeq()-before)
		}
	}
}

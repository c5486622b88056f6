package labapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/wal"
)

// TestDegradedOnFsyncFailure: an fsync failure puts the log in its failed
// state; the write that hit it and every later one answer 503 DEGRADED
// with a fix, nothing is acknowledged, health says degraded with the
// cause, and reads keep working.
func TestDegradedOnFsyncFailure(t *testing.T) {
	faults := &wal.Faults{}
	tl := newTestLabEngine(t, engine.Options{Faults: faults})
	ok := tl.do("POST", "/api/feedback", `{"notes":"ok"}`, "X-CM-LAB-REQUEST-ID", "k-ok")
	if ok.status != 200 {
		t.Fatalf("healthy write: %d %s", ok.status, ok.body)
	}
	seq := tl.lastSeq()
	faults.FailSync(errors.New("no space left on device"))
	r := tl.do("POST", "/api/feedback", `{"notes":"lost"}`, "X-CM-LAB-REQUEST-ID", "k-degraded")
	if r.status != 503 || r.code() != CodeDegraded || !strings.Contains(string(r.body), "no space left on device") || !strings.Contains(string(r.body), `"fix"`) {
		t.Fatalf("write hitting the fsync failure: %d %s", r.status, r.body)
	}
	r = tl.do("POST", "/api/feedback", `{"notes":"later"}`)
	if r.status != 503 || r.code() != CodeDegraded {
		t.Fatalf("later write: %d %s", r.status, r.body)
	}
	if got := tl.lastSeq(); got != seq {
		t.Fatalf("LastSeq moved %d → %d while failed", seq, got)
	}
	if r := tl.do("POST", "/api/feedback", `{"notes":"ok"}`, "X-CM-LAB-REQUEST-ID", "k-ok"); r.status != 200 || string(r.body) != string(ok.body) {
		t.Fatalf("retry of an acknowledged request while degraded: %d %s", r.status, r.body)
	}
	h2 := tl.do("GET", "/api/health", "").json(t)
	if h2["status"] != "degraded" || !strings.Contains(h2["cause"].(string), "no space left on device") {
		t.Fatalf("health: %v", h2)
	}
	r = tl.do("GET", "/api/feedback?since=0", "")
	if r.status != 200 || strings.Count(string(r.body), `"id"`) != 1 {
		t.Fatalf("read while degraded: %d %s", r.status, r.body)
	}
}

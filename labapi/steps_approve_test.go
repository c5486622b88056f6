package labapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStepApproveRoute: POST /api/steps/{m}/approve takes no hash, records
// the world hash the daemon takes, and a retry with the same request id
// appends nothing; a step without a world is refused with a fix naming
// `cmlab step complete`.
func TestStepApproveRoute(t *testing.T) {
	tl := newTestLab(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := `{"steps":[{"step_id":"a","tool":"sh","params_hash":"` + stepHash("1") + `","world":["out.txt"],"dir":"` + dir + `"},` +
		`{"step_id":"b","tool":"sh","params_hash":"` + stepHash("2") + `"}]}`
	for _, c := range []struct{ path, body string }{
		{"/api/steps/m1/plan", plan},
		{"/api/steps/m1/executing", `{"step_id":"a","observed_pre_hash":"` + stepHash("3") + `"}`},
		{"/api/steps/m1/executing", `{"step_id":"b","observed_pre_hash":"` + stepHash("3") + `"}`},
	} {
		if r := tl.do("POST", c.path, c.body); r.status != 200 {
			t.Fatal(c.path, r.status, string(r.body))
		}
	}
	seq := tl.lastSeq()
	r := tl.do("POST", "/api/steps/m1/approve", `{"step_id":"b"}`)
	if r.status != 400 || !strings.Contains(string(r.body), "cmlab step complete") || tl.lastSeq() != seq {
		t.Fatalf("approve without a world: %d %s", r.status, r.body)
	}
	r = tl.do("POST", "/api/steps/m1/approve", `{"step_id":"a","note":"looked"}`, "X-CM-LAB-REQUEST-ID", "appr-1")
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"completed"`) || tl.lastSeq() != seq+1 {
		t.Fatalf("approve: %d %s (seq %d → %d)", r.status, r.body, seq, tl.lastSeq())
	}
	again := tl.do("POST", "/api/steps/m1/approve", `{"step_id":"a","note":"looked"}`, "X-CM-LAB-REQUEST-ID", "appr-1")
	if again.status != 200 || string(again.body) != string(r.body) || tl.lastSeq() != seq+1 {
		t.Fatalf("retry: %d %s (seq %d)", again.status, again.body, tl.lastSeq())
	}
	ev, err := tl.eng.Log().Read(seq + 1)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "step.completed" || ev.Req != "appr-1" {
		t.Fatalf("event %s req %q", ev.Type, ev.Req)
	}
}

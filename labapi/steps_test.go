package labapi

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
)

func stepHash(c string) string { return "sha256-" + strings.Repeat(c, 64) }

func TestStepRoutes(t *testing.T) {
	tl := newTestLab(t)
	plan := `{"name":"n","steps":[{"step_id":"a","tool":"sh","params_hash":"` + stepHash("1") + `","pre_hash":"` + stepHash("2") + `"},{"step_id":"b","tool":"sh","params_hash":"` + stepHash("3") + `","idem_key":"mine"}]}`
	steps := []struct {
		name, path, body string
		hdr              []string
		status           int
		code             string
		want             string // substring of the body
	}{
		{"no token", "/api/steps/m1/plan", plan, []string{"X-CM-LAB-TOKEN", ""}, 401, "UNAUTHORIZED", ""},
		{"plan", "/api/steps/m1/plan", plan, []string{"X-CM-LAB-REQUEST-ID", "r-plan"}, 200, "", `"status":"planned"`},
		{"plan replayed", "/api/steps/m1/plan", plan, []string{"X-CM-LAB-REQUEST-ID", "r-plan"}, 200, "", `"status":"planned"`},
		{"plan again", "/api/steps/m1/plan", plan, nil, 400, "INVALID_ARGUMENT", "already planned"},
		{"same id other body", "/api/steps/m1/executing", `{"step_id":"a"}`, []string{"X-CM-LAB-REQUEST-ID", "r-plan"}, 409, "IDEMPOTENCY_KEY_REUSED", ""},
		{"complete before executing", "/api/steps/m1/completed", `{"step_id":"a","post_hash":"` + stepHash("4") + `","result_hash":"` + stepHash("5") + `"}`, nil, 400, "INVALID_ARGUMENT", "pending"},
		{"unknown step", "/api/steps/m1/executing", `{"step_id":"zz","observed_pre_hash":"` + stepHash("2") + `"}`, nil, 404, "NOT_FOUND", ""},
		{"unknown mandate", "/api/steps/m9/executing", `{"step_id":"a","observed_pre_hash":"` + stepHash("2") + `"}`, nil, 404, "NOT_FOUND", ""},
		{"bad hash", "/api/steps/m1/executing", `{"step_id":"a","observed_pre_hash":"sha256-nothex"}`, nil, 400, "INVALID_ARGUMENT", ""},
		{"bad json", "/api/steps/m1/executing", `{"step_id":`, nil, 400, "INVALID_JSON", ""},
		{"bad mandate id", "/api/steps/..bad%20id/executing", `{}`, nil, 400, "INVALID_ARGUMENT", ""},
		{"mandate id mismatch", "/api/steps/m1/executing", `{"mandate_id":"m2","step_id":"a","observed_pre_hash":"` + stepHash("2") + `"}`, nil, 400, "INVALID_ARGUMENT", ""},
		{"executing", "/api/steps/m1/executing", `{"step_id":"a","observed_pre_hash":"` + stepHash("2") + `"}`, []string{"X-CM-LAB-REQUEST-ID", "r-exec"}, 200, "", `"idemKey":"idem_`},
		{"executing twice", "/api/steps/m1/executing", `{"step_id":"a","observed_pre_hash":"` + stepHash("2") + `"}`, nil, 400, "INVALID_ARGUMENT", "executing"},
		{"completed", "/api/steps/m1/completed", `{"step_id":"a","post_hash":"` + stepHash("4") + `","result_hash":"` + stepHash("5") + `","exit_code":0}`, nil, 200, "", `"status":"completed"`},
		{"completed again", "/api/steps/m1/completed", `{"step_id":"a","post_hash":"` + stepHash("4") + `","result_hash":"` + stepHash("5") + `"}`, nil, 400, "INVALID_ARGUMENT", "never completed again"},
		{"failed", "/api/steps/m1/failed", `{"step_id":"b","error_class":"x","error_msg":"` + strings.Repeat("e", 700) + `"}`, nil, 200, "", `"status":"failed"`},
		{"review", "/api/steps/m1/review", `{"step_id":"b","reason":"look at it"}`, nil, 200, "", `"status":"needs_review"`},
		{"reset", "/api/steps/m1/reset", `{"step_id":"b"}`, nil, 200, "", `"idemKey":"mine"`},
	}
	for _, s := range steps {
		r := tl.do("POST", s.path, s.body, s.hdr...)
		if r.status != s.status || r.code() != s.code || !strings.Contains(string(r.body), s.want) {
			t.Fatalf("%s: %d %s", s.name, r.status, r.body)
		}
	}
	// One plan event despite the replayed request.
	r := tl.do("GET", "/api/steps?mandateId=m1", "")
	var got struct {
		Mandate struct {
			Status string `json:"status"`
			Steps  []struct {
				Status      string `json:"status"`
				IdemKey     string `json:"idem_key"`
				Transitions int    `json:"transitions"`
			} `json:"steps"`
		} `json:"mandate"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	a, b := got.Mandate.Steps[0], got.Mandate.Steps[1]
	if a.Status != "completed" || a.Transitions != 3 || b.Status != "pending" || b.IdemKey != "mine" {
		t.Fatalf("steps %+v", got.Mandate.Steps)
	}
	var raw struct {
		Mandate struct {
			Steps []map[string]any `json:"steps"`
		} `json:"mandate"`
	}
	json.Unmarshal(r.body, &raw)
	if msg, _ := raw.Mandate.Steps[1]["error_msg"].(string); len(msg) != 500 {
		t.Fatalf("error_msg kept %d characters", len(msg))
	}
	if r := tl.do("GET", "/api/steps?mandateId=nope", ""); r.status != 404 {
		t.Fatalf("unknown mandate: %d", r.status)
	}
	if r := tl.do("GET", "/api/steps", "", "X-CM-LAB-TOKEN", ""); r.status != 401 {
		t.Fatalf("GET without token: %d", r.status)
	}
	if r := tl.do("GET", "/api/steps", ""); r.status != 200 || !strings.Contains(string(r.body), `"mandate_id":"m1"`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	// The recovery plan through the daemon; nothing to apply here.
	last := tl.lastSeq()
	if r := tl.do("POST", "/api/recovery/apply", ""); r.status != 200 || !strings.Contains(string(r.body), `"applied":0`) {
		t.Fatalf("apply: %d %s", r.status, r.body)
	}
	if tl.lastSeq() != last {
		t.Fatal("apply with nothing to do appended")
	}
}

// TestStepRoutesHostile: malformed bodies get a 4xx envelope and append
// nothing.
func TestStepRoutesHostile(t *testing.T) {
	tl := newTestLab(t)
	ok := `{"steps":[{"step_id":"a","tool":"sh","params_hash":"` + stepHash("1") + `"}]}`
	if r := tl.do("POST", "/api/steps/m/plan", ok); r.status != 200 {
		t.Fatalf("plan: %d %s", r.status, r.body)
	}
	last := tl.lastSeq()
	for _, c := range []struct{ path, body string }{
		{"/api/steps/x/plan", `[]`},
		{"/api/steps/x/plan", `null`},
		{"/api/steps/x/plan", `"steps"`},
		{"/api/steps/x/plan", `{"steps":null}`},
		{"/api/steps/x/plan", `{"steps":{}}`},
		{"/api/steps/x/plan", `{"steps":[null]}`},
		{"/api/steps/x/plan", `{"steps":[{"step_id":"a","tool":"sh","params_hash":"` + stepHash("1") + `","dir":"relative"}]}`},
		{"/api/steps/x/plan", `{"steps":[{"step_id":"a","tool":"sh","params_hash":"` + stepHash("1") + `","world":[""]}]}`},
		{"/api/steps/x/plan", `{"steps":[{"step_id":"a","tool":"","params_hash":"` + stepHash("1") + `"}]}`},
		{"/api/steps/x/plan", `{"steps":[{"step_id":"a","tool":"t","params_hash":"x"}]}`},
		{"/api/steps/x/plan", `{"steps":[{"step_id":"a/b","tool":"t","params_hash":"` + stepHash("1") + `"}]}`},
		{"/api/steps/x/plan", `{"spec":"not base64!","steps":[{"step_id":"a","tool":"t","params_hash":"` + stepHash("1") + `"}]}`},
		{"/api/steps/m/executing", `{"step_id":5}`},
		{"/api/steps/m/executing", `{"step_id":"a","observed_pre_hash":["x"]}`},
		{"/api/steps/m/executing", `{}`},
		{"/api/steps/m/completed", `{"step_id":"a","post_hash":"` + stepHash("1") + `","result_hash":"` + stepHash("1") + `","exit_code":"zero"}`},
		{"/api/steps/m/failed", `{"step_id":"a","error_msg":"no class"}`},
		{"/api/steps/m/review", `{"step_id":"a"}`},
		{"/api/steps/m/review", `{"step_id":"a","reason":"r","evidence":"text"}`},
		{"/api/steps/m/reset", `{"step_id":"a"}`},
		{"/api/steps/m/nonsense", `{}`},
		{"/api/steps/m/executing", `{"step_id":"a","observed_pre_hash":"` + stepHash("1") + `"} trailing`},
	} {
		r := tl.do("POST", c.path, c.body)
		if r.status < 400 || r.status > 499 || (r.status != 404 && r.status != 405 && r.code() == "") {
			t.Fatalf("%s %s: %d %s", c.path, c.body, r.status, r.body)
		}
	}
	if tl.lastSeq() != last {
		t.Fatalf("hostile bodies appended %d events", tl.lastSeq()-last)
	}
}

// POST /api/recovery/apply takes a request id like every mutating route
// (SPEC §6): its retry gets the first answer back, flagged as a replay,
// and appends nothing; the id with another body is IDEMPOTENCY_KEY_REUSED.
// (It used to ignore request ids: a retry planned again.)
func TestRecoveryApplyRequestID(t *testing.T) {
	tl := newTestLab(t, func(o *Options) {
		// A step left executing before this daemon started: the plan
		// puts it up for review.
		j, err := steps.NewJournal(o.Engine)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := j.RecordRequest(ctx, &events.StepPlanned{MandateID: "m1", Steps: []events.PlannedStep{{StepID: "a", Tool: "sh", ParamsHash: stepHash("1"), PreHash: stepHash("2")}}}, "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := j.RecordRequest(ctx, &events.StepExecuting{MandateID: "m1", StepID: "a", ObservedPreHash: stepHash("2")}, "", ""); err != nil {
			t.Fatal(err)
		}
	})
	before := tl.lastSeq()
	first := tl.do("POST", "/api/recovery/apply", "", "X-CM-LAB-REQUEST-ID", "r-apply")
	var plan recovery.Plan
	if err := json.Unmarshal(first.body, &plan); err != nil || first.status != 200 || plan.Applied != 2 || len(plan.Steps) != 1 || plan.Steps[0].Action != recovery.ActionNeedsReview {
		t.Fatalf("apply: %d %s", first.status, first.body)
	}
	if got := tl.lastSeq(); got != before+2 {
		t.Fatalf("apply appended %d events, want 2 (step.needs_review, recovery.applied)", got-before)
	}
	again := tl.do("POST", "/api/recovery/apply", "", "X-CM-LAB-REQUEST-ID", "r-apply")
	if again.status != 200 || again.header.Get("X-CM-LAB-IDEMPOTENT-REPLAY") != "true" || !bytes.Equal(bytes.TrimSpace(again.body), bytes.TrimSpace(first.body)) {
		t.Fatalf("retry: %d replay=%q %s\nfirst %s", again.status, again.header.Get("X-CM-LAB-IDEMPOTENT-REPLAY"), again.body, first.body)
	}
	if r := tl.do("POST", "/api/recovery/apply", `{"only":"m1"}`, "X-CM-LAB-REQUEST-ID", "r-apply"); r.status != 409 || r.code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("other body: %d %s", r.status, r.body)
	}
	if got := tl.lastSeq(); got != before+2 {
		t.Fatalf("retries appended %d events", got-before-2)
	}
}

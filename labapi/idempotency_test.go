package labapi

import (
	"fmt"
	"reflect"
	"testing"
)

// TestRequestIDMustBeAString (issue 15 §4): a body requestId or request_id
// that is not a string is refused with 400 INVALID_ARGUMENT naming the
// field — on Lab, terminal and step routes, header or not — and nothing is
// appended; before, it was silently ignored and a retry acted twice.
func TestRequestIDMustBeAString(t *testing.T) {
	tl := newPtyLab(t)
	type tc struct {
		name, path, body string
		hdr              []string
	}
	cases := []tc{
		{"number", "/api/feedback", `{"notes":"n","requestId":5}`, nil},
		{"float", "/api/feedback", `{"notes":"n","requestId":1.5}`, nil},
		{"object", "/api/feedback", `{"notes":"n","requestId":{"id":"x"}}`, nil},
		{"array", "/api/feedback", `{"notes":"n","requestId":["x"]}`, nil},
		{"bool", "/api/feedback", `{"notes":"n","requestId":true}`, nil},
		{"snake number", "/api/feedback", `{"notes":"n","request_id":7}`, nil},
		{"number beside a header", "/api/feedback", `{"notes":"n","requestId":5}`, []string{"X-CM-LAB-REQUEST-ID", "h-1"}},
		{"string then number", "/api/feedback", `{"notes":"n","requestId":"ok","request_id":3}`, nil},
		{"experiment", "/api/experiments", `{"requestId":42}`, nil},
		{"import", "/api/runs/import", `{"path":"/x","requestId":42}`, nil},
		{"export", "/api/export", `{"sessionId":"lab_test","requestId":42}`, nil},
		{"exec_block", "/api/pty/c1/exec_block", `{"cmd":"echo hi","requestId":42}`, nil},
		{"step plan", "/api/steps/m1/plan", `{"name":"n","steps":[],"requestId":42}`, nil},
		{"recovery apply", "/api/recovery/apply", `{"requestId":42}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seq := tl.lastSeq()
			r := tl.do("POST", c.path, c.body, c.hdr...)
			if r.status != 400 || r.code() != CodeInvalidArgument {
				t.Fatalf("%d %s, want 400 INVALID_ARGUMENT", r.status, r.body)
			}
			f, _ := r.json(t)["error"].(map[string]any)["context"].(map[string]any)["field"].(string)
			if f != "requestId" && f != "request_id" {
				t.Fatalf("context.field = %q: %s", f, r.body)
			}
			if got := tl.lastSeq(); got != seq {
				t.Fatalf("appended: seq %d → %d", seq, got)
			}
		})
	}
	// A string id (body or snake case) still deduplicates; null is absent.
	for _, body := range []string{`{"notes":"a","requestId":"r-1"}`, `{"notes":"b","request_id":"r-2"}`} {
		first := tl.do("POST", "/api/feedback", body)
		seq := tl.lastSeq()
		again := tl.do("POST", "/api/feedback", body)
		if first.status != 200 || string(again.body) != string(first.body) || tl.lastSeq() != seq {
			t.Fatalf("string id %s: %d %s / %s, seq %d → %d", body, first.status, first.body, again.body, seq, tl.lastSeq())
		}
	}
	seq := tl.lastSeq()
	if r := tl.do("POST", "/api/feedback", `{"notes":"c","requestId":null}`); r.status != 200 || tl.lastSeq() != seq+1 {
		t.Fatalf("null id: %d %s", r.status, r.body)
	}
}

// TestIdempotencyHoldsNoDoneMap: the request ids done live in the on-disk
// index; the only map the dedupe type keeps is the in-flight locks.
func TestIdempotencyHoldsNoDoneMap(t *testing.T) {
	typ := reflect.TypeOf(idempotency{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() == reflect.Map && f.Name != "inflight" {
			t.Fatalf("idempotency.%s is a map: request ids must not live in the heap", f.Name)
		}
	}
	tl := newTestLab(t)
	for i := range 50 {
		r := tl.do("POST", "/api/feedback", fmt.Sprintf(`{"notes":"n%d"}`, i), "X-CM-LAB-REQUEST-ID", fmt.Sprintf("id-%d", i))
		if r.status != 200 {
			t.Fatalf("POST: %d %s", r.status, r.body)
		}
	}
	tl.srv.idem.mu.Lock()
	n := len(tl.srv.idem.inflight)
	tl.srv.idem.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d in-flight locks left after the requests ended", n)
	}
}

// TestRequestIDFieldCaseFolds: the body's request id is read once with
// the hash (bodyFields); a key that only case-folds to requestId or
// request_id is still taken, as encoding/json always matched it: a number
// there is refused, a string deduplicates.
func TestRequestIDFieldCaseFolds(t *testing.T) {
	tl := newTestLab(t)
	if r := tl.do("POST", "/api/feedback", `{"notes":"n","RequestID":5}`); r.status != 400 || r.code() != CodeInvalidArgument {
		t.Fatalf("RequestID 5: %d %s", r.status, r.body)
	}
	seq := tl.lastSeq()
	first := tl.do("POST", "/api/feedback", `{"notes":"n","REQUEST_ID":"fold-1"}`)
	again := tl.do("POST", "/api/feedback", `{"notes":"n","REQUEST_ID":"fold-1"}`)
	if first.status != 200 || again.status != 200 || again.header.Get("X-CM-LAB-IDEMPOTENT-REPLAY") != "true" || string(first.body) != string(again.body) {
		t.Fatalf("first %d %s, again %d %s %v", first.status, first.body, again.status, again.body, again.header)
	}
	if got := tl.lastSeq(); got != seq+1 {
		t.Fatalf("log grew by %d events, want 1", got-seq)
	}
}

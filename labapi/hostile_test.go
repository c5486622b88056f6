package labapi

import (
	"strings"
	"testing"
)

// TestHostileRequests: every hostile request gets the right 4xx envelope
// and changes nothing in the log.
func TestHostileRequests(t *testing.T) {
	tl := newTestLab(t)
	runID := tl.importRun(tl.mkRun("a", map[string]string{"video.mp4": "v", "script.json": "{}"}))
	run2 := tl.importRun(tl.mkRun("b", map[string]string{"video.mp4": "w"}))
	r := tl.do("POST", "/api/experiments", `{"baselineRunId":"`+runID+`","variants":[{"runId":"`+run2+`"}]}`)
	expID := r.json(t)["experimentId"].(string)
	tl.do("POST", "/api/feedback", `{"notes":"seed"}`, "X-CM-LAB-REQUEST-ID", "used-key")
	seq := tl.lastSeq()

	huge := `{"notes":"` + strings.Repeat("x", MaxBody) + `"}`
	noTok := []string{"X-CM-LAB-TOKEN", ""}
	badTok := []string{"X-CM-LAB-TOKEN", "wrong"}
	type tc struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     string
	}
	fb := func(name, body string, status int, code string) tc {
		return tc{name, "POST", "/api/feedback", body, nil, status, code}
	}
	cases := []tc{
		fb("bad json", `{`, 400, CodeInvalidJSON),
		fb("not an object", `[1,2]`, 400, CodeInvalidJSON),
		fb("a string", `"x"`, 400, CodeInvalidJSON),
		fb("a number", `42`, 400, CodeInvalidJSON),
		fb("trailing data", `{"notes":"a"} {"notes":"b"}`, 400, CodeInvalidJSON),
		fb("trailing garbage", `{"notes":"a"}x`, 400, CodeInvalidJSON),
		fb("null body", `null`, 400, CodeInvalidArgument),
		fb("empty object", `{}`, 400, CodeInvalidArgument),
		fb("rating -1", `{"ratings":{"overall":-1}}`, 400, CodeInvalidArgument),
		fb("rating 101", `{"ratings":{"overall":101}}`, 400, CodeInvalidArgument),
		fb("rating 1.5", `{"ratings":{"overall":1.5}}`, 400, CodeInvalidArgument),
		fb("rating string", `{"ratings":{"overall":"x"}}`, 400, CodeInvalidArgument),
		fb("rating numeric string", `{"ratings":{"hook":"50"}}`, 400, CodeInvalidArgument),
		fb("rating bool", `{"ratings":{"sync":true}}`, 400, CodeInvalidArgument),
		fb("rating object", `{"ratings":{"sync":{}}}`, 400, CodeInvalidArgument),
		fb("rating 1e3", `{"ratings":{"sync":1e3}}`, 400, CodeInvalidArgument),
		fb("unknown rating", `{"ratings":{"vibes":50}}`, 400, CodeInvalidArgument),
		fb("ratings array", `{"ratings":[50]}`, 400, CodeInvalidArgument),
		fb("ratings string", `{"ratings":"good"}`, 400, CodeInvalidArgument),
		fb("runId number", `{"runId":5}`, 400, CodeInvalidArgument),
		fb("runId traversal", `{"runId":"../../etc/passwd"}`, 400, CodeInvalidArgument),
		fb("runId dotdot", `{"runId":".."}`, 400, CodeInvalidArgument),
		fb("runId unknown", `{"runId":"run_nope"}`, 404, CodeNotFound),
		fb("runId too long", `{"runId":"`+strings.Repeat("a", 200)+`"}`, 400, CodeInvalidArgument),
		fb("experimentId slash", `{"experimentId":"a/b","notes":"n"}`, 400, CodeInvalidArgument),
		fb("tags not array", `{"notes":"n","tags":"x"}`, 400, CodeInvalidArgument),
		fb("tags of numbers", `{"notes":"n","tags":[1]}`, 400, CodeInvalidArgument),
		fb("notes object", `{"notes":{}}`, 400, CodeInvalidArgument),
		fb("answers array", `{"notes":"n","answers":[1]}`, 400, CodeInvalidArgument),
		fb("answers string", `{"notes":"n","answers":"yes"}`, 400, CodeInvalidArgument),
		{"reused key", "POST", "/api/feedback", `{"notes":"different"}`, []string{"X-CM-LAB-REQUEST-ID", "used-key"}, 409, CodeIdempotencyKeyReused},
		fb("huge body", huge, 413, CodePayloadTooLarge),
		{"huge request id", "POST", "/api/feedback", `{"notes":"n"}`, []string{"X-CM-LAB-REQUEST-ID", strings.Repeat("r", 300)}, 400, CodeInvalidArgument},
		fb("huge body request id", `{"notes":"n","requestId":"`+strings.Repeat("r", 300)+`"}`, 400, CodeInvalidArgument),
		{"huge body no token", "POST", "/api/feedback", huge, noTok, 401, CodeUnauthorized},
		{"missing token", "POST", "/api/feedback", `{"notes":"n"}`, noTok, 401, CodeUnauthorized},
		{"wrong token", "POST", "/api/feedback", `{"notes":"n"}`, badTok, 401, CodeUnauthorized},
		{"bearer wrong", "POST", "/api/feedback", `{"notes":"n"}`, []string{"X-CM-LAB-TOKEN", "", "Authorization", "Bearer nope"}, 401, CodeUnauthorized},
		{"basic auth", "POST", "/api/feedback", `{"notes":"n"}`, []string{"X-CM-LAB-TOKEN", "", "Authorization", "Basic " + tl.token}, 401, CodeUnauthorized},
		{"foreign host", "POST", "/api/feedback", `{"notes":"n"}`, []string{"Host", "evil.example"}, 403, CodeForbidden},
		{"foreign host GET", "GET", "/api/config", "", []string{"Host", "evil.example:80"}, 403, CodeForbidden},
		{"rebinding host wrong port", "GET", "/api/config", "", []string{"Host", "127.0.0.1:1"}, 403, CodeForbidden},
		{"foreign origin", "POST", "/api/feedback", `{"notes":"n"}`, []string{"Origin", "http://evil.example"}, 403, CodeForbidden},
		{"null origin", "POST", "/api/feedback", `{"notes":"n"}`, []string{"Origin", "null"}, 403, CodeForbidden},
		{"file origin", "GET", "/api/config", "", []string{"Origin", "file://"}, 403, CodeForbidden},
		{"unknown route", "GET", "/api/nope", "", nil, 404, CodeNotFound},
		{"unknown POST route", "POST", "/api/runs/x/delete", `{}`, nil, 404, CodeNotFound},
		{"wrong method", "DELETE", "/api/feedback", "", nil, 404, CodeNotFound},
		{"PUT feedback", "PUT", "/api/feedback", `{"notes":"n"}`, nil, 404, CodeNotFound},
		{"cursor letters", "GET", "/api/feedback?since=abc", "", nil, 400, CodeInvalidCursor},
		{"cursor negative", "GET", "/api/feedback?since=-1", "", nil, 400, CodeInvalidCursor},
		{"cursor past end", "GET", "/api/feedback?since=999999", "", nil, 400, CodeInvalidCursor},
		{"cursor misaligned", "GET", "/api/feedback?since=1", "", nil, 400, CodeInvalidCursor},
		{"cursor hex", "GET", "/api/feedback?since=0x10", "", nil, 400, CodeInvalidCursor},
		{"import traversal", "POST", "/api/runs/import", `{"path":"` + tl.root + `/../../../../etc"}`, nil, 403, CodeForbidden},
		{"import etc", "POST", "/api/runs/import", `{"path":"/etc/passwd"}`, nil, 403, CodeForbidden},
		{"import relative traversal", "POST", "/api/runs/import", `{"path":"../../../../../../etc"}`, nil, 403, CodeForbidden},
		{"import missing", "POST", "/api/runs/import", `{"path":"/definitely/not/here"}`, nil, 404, CodeFileNotFound},
		{"import NUL", "POST", "/api/runs/import", `{"path":"/tmp/a\u0000b"}`, nil, 400, CodeInvalidArgument},
		{"import path number", "POST", "/api/runs/import", `{"path":7}`, nil, 400, CodeInvalidArgument},
		{"import no path", "POST", "/api/runs/import", `{}`, nil, 400, CodeInvalidArgument},
		{"run id traversal", "GET", "/api/runs/..%2F..%2Fetc", "", nil, 400, CodeInvalidArgument},
		{"run unknown", "GET", "/api/runs/run_nope", "", nil, 404, CodeNotFound},
		{"video unknown run", "GET", "/api/runs/run_nope/video", "", nil, 404, CodeNotFound},
		{"artifact not allowed", "GET", "/api/runs/" + runID + "/artifact/video.mp4", "", nil, 403, CodeForbidden},
		{"artifact traversal", "GET", "/api/runs/" + runID + "/artifact/..%2F..%2Fetc%2Fpasswd", "", nil, 403, CodeForbidden},
		{"artifact dotfile", "GET", "/api/runs/" + runID + "/artifact/.env", "", nil, 403, CodeForbidden},
		{"artifact allowed but missing", "GET", "/api/runs/" + runID + "/artifact/score.json", "", nil, 404, CodeNotFound},
		{"experiment traversal", "GET", "/api/experiments/..%2Fx", "", nil, 400, CodeInvalidArgument},
		{"experiment unknown", "GET", "/api/experiments/exp_nope", "", nil, 404, CodeNotFound},
		{"submit unknown", "POST", "/api/experiments/exp_nope/submit", `{}`, nil, 404, CodeNotFound},
		{"submit bad json", "POST", "/api/experiments/" + expID + "/submit", `{"perRun":`, nil, 400, CodeInvalidJSON},
		{"submit perRun object", "POST", "/api/experiments/" + expID + "/submit", `{"perRun":{}}`, nil, 400, CodeInvalidArgument},
		{"submit perRun of strings", "POST", "/api/experiments/" + expID + "/submit", `{"perRun":["a"]}`, nil, 400, CodeInvalidArgument},
		{"submit no token", "POST", "/api/experiments/" + expID + "/submit", `{}`, noTok, 401, CodeUnauthorized},
		{"create no token", "POST", "/api/experiments", `{}`, noTok, 401, CodeUnauthorized},
		{"create variants wrong", "POST", "/api/experiments", `{"baselineRunId":"` + runID + `","variants":[1]}`, nil, 400, CodeInvalidArgument},
		{"create baseline number", "POST", "/api/experiments", `{"baselineRunId":1}`, nil, 400, CodeInvalidArgument},
		{"export outside", "POST", "/api/export", `{"sessionId":"lab_test","path":"/tmp/x.json"}`, nil, 403, CodeForbidden},
		{"export traversal", "POST", "/api/export", `{"sessionId":"lab_test","path":"../../state/token"}`, nil, 403, CodeForbidden},
		{"export dir itself", "POST", "/api/export", `{"sessionId":"lab_test","path":"."}`, nil, 403, CodeForbidden},
		{"export no session", "POST", "/api/export", `{}`, nil, 400, CodeInvalidArgument},
		{"export bad session", "POST", "/api/export", `{"sessionId":"../x"}`, nil, 400, CodeInvalidArgument},
		{"export no token", "POST", "/api/export", `{"sessionId":"lab_test"}`, noTok, 401, CodeUnauthorized},
		{"events bad since", "GET", "/api/events?since=x", "", nil, 400, CodeInvalidCursor},
		{"events since past end", "GET", "/api/events?since=999999", "", nil, 400, CodeInvalidCursor},
		{"events no token", "GET", "/api/events", "", noTok, 401, CodeUnauthorized},
		{"events wrong query token", "GET", "/api/events?token=nope", "", noTok, 401, CodeUnauthorized},
		{"events bad Last-Event-ID", "GET", "/api/events", "", []string{"Last-Event-ID", "-3"}, 400, CodeInvalidCursor},
	}
	if len(cases) < 60 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := tl.do(c.method, c.path, c.body, c.hdr...)
			if r.status != c.status || r.code() != c.code {
				t.Fatalf("%s %s: %d %s, want %d %s", c.method, c.path, r.status, truncate(string(r.body), 300), c.status, c.code)
			}
			if r.header.Get("Content-Type") != "application/json; charset=utf-8" || r.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("headers: %v", r.header)
			}
			m := r.json(t)["error"].(map[string]any)
			if m["message"] == "" || m["context"] == nil {
				t.Fatalf("envelope: %s", r.body)
			}
			if got := tl.lastSeq(); got != seq {
				t.Fatalf("log changed: seq %d → %d", seq, got)
			}
		})
	}
}

package fuzz

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzGETRoutes sends arbitrary path segments, queries and Range headers
// to the Lab's read routes. Properties: never a 5xx or a panic; a non-2xx
// answer is an error envelope; nothing is served from outside the run's
// artifacts directory (a secret file beside the allowed root never leaks);
// an artifact or video answered 200/206 holds bytes of a file of that run;
// a read appends nothing to the log.
func FuzzGETRoutes(f *testing.F) {
	dir := f.TempDir()
	a := newAPITarget(f, dir)
	secret := []byte("TOP-SECRET-" + strings.Repeat("z", 20))
	os.WriteFile(filepath.Join(dir, "secret.txt"), secret, 0o600)
	os.WriteFile(filepath.Join(dir, "runs", "secret.json"), secret, 0o600)
	var runs struct {
		Items []struct {
			RunID string `json:"runId"`
		} `json:"items"`
	}
	rec := a.get("/api/runs")
	if err := json.Unmarshal(rec.Body.Bytes(), &runs); err != nil || len(runs.Items) == 0 {
		f.Fatalf("runs: %s", rec.Body.Bytes())
	}
	run := runs.Items[0].RunID
	templates := []string{
		"/api/runs/" + run + "/artifact/%s", "/api/runs/%s", "/api/runs/%s/video", "/api/runs/" + run + "/video",
		"/api/experiments/%s", "/api/feedback?%s", "/api/runs?%s", "/api/session?%s",
	}
	f.Add(uint8(0), "script.json", "")
	f.Add(uint8(0), "../../secret.txt", "")
	f.Add(uint8(0), "..%2f..%2fsecret.txt", "")
	f.Add(uint8(0), "sync-report-attempt1.json", "")
	f.Add(uint8(3), "", "bytes=0-3")
	f.Add(uint8(3), "", "bytes=-5,1-2")
	f.Add(uint8(3), "", "bytes=99999999999999999999-")
	f.Add(uint8(1), "..", "")
	f.Add(uint8(5), "since=0&limit=-1&sessionId=lab_fuzz", "")
	f.Add(uint8(5), "since=3&limit=abc", "")
	f.Add(uint8(4), "exp_%00", "")
	f.Fuzz(func(t *testing.T, idx uint8, seg, rangeHdr string) {
		tmpl := templates[int(idx)%len(templates)]
		var target string
		if strings.Contains(tmpl, "?%s") {
			target = strings.Replace(tmpl, "%s", seg, 1)
		} else {
			target = strings.Replace(tmpl, "%s", url.PathEscape(seg), 1)
		}
		if _, err := url.ParseRequestURI(target); err != nil {
			return
		}
		before := a.eng.Log().LastSeq()
		for _, method := range []string{"GET", "HEAD"} {
			r, err := http.NewRequest(method, "http://127.0.0.1:7788"+target, nil)
			if err != nil || strings.ContainsAny(target, " \t\r\n") {
				return // not a request a client can send
			}
			if rangeHdr != "" {
				r.Header.Set("Range", rangeHdr)
			}
			rec := httptest.NewRecorder()
			a.h.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if rec.Code >= 500 {
				t.Fatalf("%s %s (Range %q): %d %s", method, target, rangeHdr, rec.Code, body)
			}
			if bytes.Contains(body, secret) {
				t.Fatalf("%s %s leaked a file outside the run's artifacts", method, target)
			}
			if method == "GET" && rec.Code >= 400 && rec.Code != http.StatusRequestedRangeNotSatisfiable {
				var env struct {
					Error *struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				if json.Unmarshal(body, &env) != nil || env.Error == nil || env.Error.Code == "" {
					t.Fatalf("%s %s: %d without an error envelope: %q", method, target, rec.Code, body)
				}
			}
		}
		if a.eng.Log().LastSeq() != before {
			t.Fatalf("GET %s appended to the log", target)
		}
	})
}

func (a *apiTarget) get(path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "http://127.0.0.1:7788"+path, nil)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	return rec
}

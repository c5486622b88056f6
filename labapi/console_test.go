package labapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/console"
)

// fakeClock is a settable clock for the console's sessions.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
func (l *lockedBuffer) Len() int       { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Len() }

// loginCode asks tl for a code with the operator token.
func (tl *testLab) loginCode() ConsoleLogin {
	tl.t.Helper()
	r := tl.do("POST", "/api/console/login-code", "")
	if r.status != 200 {
		tl.t.Fatalf("login-code: %d %s", r.status, r.body)
	}
	m := r.json(tl.t)
	return ConsoleLogin{Code: m["code"].(string), URL: m["url"].(string), ExpiresAt: m["expiresAt"].(string)}
}

// exchange GETs /console/login?code= without following the redirect.
func exchange(t *testing.T, base, code string) *http.Response {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(base + "/console/login?code=" + code)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func sessionCookie(t *testing.T, res *http.Response) string {
	t.Helper()
	for _, c := range res.Cookies() {
		if c.Name == console.CookieName {
			return c.Value
		}
	}
	t.Fatalf("no %s cookie in %v", console.CookieName, res.Header["Set-Cookie"])
	return ""
}

// TestConsoleLogin: a code from the operator token is exchanged once for
// an HttpOnly, SameSite=Strict cookie and a redirect without the code;
// the cookie opens the console's routes and no other operator route.
func TestConsoleLogin(t *testing.T) {
	var logBuf lockedBuffer
	tl := newTestLab(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	login := tl.loginCode()
	if len(login.Code) != 64 || login.URL != tl.hs.URL+"/console/login?code="+login.Code {
		t.Fatalf("login %+v (base %s)", login, tl.hs.URL)
	}
	res := exchange(t, tl.hs.URL, login.Code)
	if res.StatusCode != 303 || res.Header.Get("Location") != "/console/" {
		t.Fatalf("exchange: %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	sc := res.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	cookie := sessionCookie(t, res)
	if len(cookie) != 64 || cookie == login.Code {
		t.Fatalf("session id %q", cookie)
	}
	withCookie := []string{"X-CM-LAB-TOKEN", "", "Cookie", console.CookieName + "=" + cookie}
	for _, path := range []string{"/api/console/overview", "/api/console/log", "/api/console/trace?id=x", "/api/console/recovery", "/api/console/pty", "/api/steps", "/api/recovery/plan"} {
		if r := tl.do("GET", path, "", withCookie...); r.status != 200 {
			t.Errorf("GET %s with the cookie: %d %s", path, r.status, r.body)
		}
	}
	// The cookie is no operator token elsewhere.
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/metrics", ""}, {"POST", "/mcp", "{}"}, {"POST", "/api/pty/c1/exec_block", `{"cmd":"true"}`},
		{"POST", "/api/console/login-code", ""}, {"POST", "/api/console/revoke", ""},
		{"POST", "/api/steps/m1/plan", `{"steps":[]}`},
	} {
		origin := []string{"Origin", tl.hs.URL}
		if r := tl.do(rt.method, rt.path, rt.body, append(withCookie, origin...)...); r.status != 401 {
			t.Errorf("%s %s with the cookie: %d %s, want 401", rt.method, rt.path, r.status, r.body)
		}
	}
	// /console goes to the console; its pages carry the CSP.
	if res := exchange(t, tl.hs.URL, "x"); res.StatusCode != 401 {
		t.Errorf("a made-up code: %d", res.StatusCode)
	}
	page := tl.do("GET", "/console/", "", "X-CM-LAB-TOKEN", "")
	if page.status != 200 || page.header.Get("Content-Security-Policy") != console.CSP || !strings.Contains(string(page.body), "/console/js/app.js") {
		t.Errorf("the console page: %d CSP %q", page.status, page.header.Get("Content-Security-Policy"))
	}
	// A used code is spent.
	if res := exchange(t, tl.hs.URL, login.Code); res.StatusCode != 401 || len(res.Cookies()) != 0 {
		t.Errorf("reused code: %d %v", res.StatusCode, res.Cookies())
	}
	// Nothing of the code or the session reaches the daemon log, /metrics or the log.
	metrics := tl.do("GET", "/metrics", "")
	var wal bytes.Buffer
	for ev, err := range tl.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		wal.WriteString(ev.Req + string(ev.Resp) + ev.Stream)
	}
	if logBuf.Len() == 0 || !strings.Contains(logBuf.String(), "/console/login") {
		t.Fatalf("the request log did not record the login: %q", logBuf.String())
	}
	for _, secret := range []string{login.Code, cookie} {
		for what, text := range map[string]string{"daemon log": logBuf.String(), "/metrics": string(metrics.body), "event log": wal.String()} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s holds a console secret", what)
			}
		}
	}
	// Revoke ends it.
	if r := tl.do("POST", "/api/console/revoke", ""); r.status != 200 || !strings.Contains(string(r.body), `"ended":1`) {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := tl.do("GET", "/api/console/overview", "", withCookie...); r.status != 401 {
		t.Errorf("revoked cookie: %d", r.status)
	}
}

// TestConsoleRefusals: the Lab token, an expired code, a code and a cookie
// of an earlier daemon run, an idle session, a forged cookie, and a write
// carrying the cookie from another origin or none: all refused, and no
// refused write appends.
func TestConsoleRefusals(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	tl := newTestLab(t, func(o *Options) { o.Console = console.SessionOptions{Now: clock.now} })
	lab := labTokenFromConfig(t, tl)
	withLab := []string{"X-CM-LAB-TOKEN", lab}
	for _, rt := range []struct{ method, path string }{
		{"POST", "/api/console/login-code"}, {"POST", "/api/console/revoke"},
		{"GET", "/api/console/overview"}, {"GET", "/api/console/log"}, {"GET", "/api/console/trace?id=x"},
	} {
		if r := tl.do(rt.method, rt.path, "", withLab...); r.status != 401 || r.code() != CodeUnauthorized {
			t.Errorf("%s %s with the Lab token: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
	// Expired: 60 s after it was drawn.
	old := tl.loginCode()
	clock.add(console.CodeTTL)
	if res := exchange(t, tl.hs.URL, old.Code); res.StatusCode != 401 {
		t.Errorf("expired code: %d", res.StatusCode)
	}
	fresh := tl.loginCode()
	clock.add(console.CodeTTL - time.Second)
	cookie := sessionCookie(t, exchange(t, tl.hs.URL, fresh.Code))
	withCookie := []string{"X-CM-LAB-TOKEN", "", "Cookie", console.CookieName + "=" + cookie}
	for _, bad := range []string{"", strings.Repeat("0", 64), cookie[:63], cookie + "0"} {
		if r := tl.do("GET", "/api/console/overview", "", "X-CM-LAB-TOKEN", "", "Cookie", console.CookieName+"="+bad); r.status != 401 {
			t.Errorf("forged cookie %q: %d", bad, r.status)
		}
	}
	if r := tl.do("GET", "/api/console/overview", "", append(withCookie, "X-CM-LAB-TOKEN", lab)...); r.status != 401 {
		t.Errorf("cookie with the Lab token: %d (a token, when sent, decides)", r.status)
	}
	// Writes with the cookie: the exact Origin, or refused.
	plan := `{"steps":[{"step_id":"a","tool":"sh","params_hash":"` + stepHash("1") + `","world":["x"],"dir":"/tmp"}]}`
	if r := tl.do("POST", "/api/steps/m1/plan", plan); r.status != 200 {
		t.Fatal(r.status, string(r.body))
	}
	if r := tl.do("POST", "/api/steps/m1/executing", `{"step_id":"a","observed_pre_hash":"`+stepHash("2")+`"}`); r.status != 200 {
		t.Fatal(r.status, string(r.body))
	}
	seq := tl.lastSeq()
	for _, origin := range []string{"", "http://evil.example", "null", strings.Replace(tl.hs.URL, "127.0.0.1", "localhost", 1)} {
		hdr := append([]string{}, withCookie...)
		if origin != "" {
			hdr = append(hdr, "Origin", origin)
		}
		r := tl.do("POST", "/api/steps/m1/reset", `{"step_id":"a","reason":"csrf"}`, hdr...)
		if r.status != 403 || r.code() != CodeForbidden {
			t.Errorf("cookie write with Origin %q: %d %s", origin, r.status, r.body)
		}
	}
	if tl.lastSeq() != seq {
		t.Fatalf("a refused console write appended (%d → %d)", seq, tl.lastSeq())
	}
	if r := tl.do("POST", "/api/steps/m1/reset", `{"step_id":"a","reason":"console"}`, append(withCookie, "Origin", tl.hs.URL)...); r.status != 200 {
		t.Fatalf("cookie write with the exact Origin: %d %s", r.status, r.body)
	}
	// Idle for IdleTTL: the session is gone.
	clock.add(console.IdleTTL)
	if r := tl.do("GET", "/api/console/overview", "", withCookie...); r.status != 401 {
		t.Errorf("idle session: %d", r.status)
	}
	// An earlier daemon run's code and cookie mean nothing to the next run.
	code := tl.loginCode()
	live := sessionCookie(t, exchange(t, tl.hs.URL, tl.loginCode().Code))
	next, err := New(withReadModels(t, Options{Engine: tl.eng, Listen: "127.0.0.1:0", OperatorToken: tl.token, SessionID: "lab_next", Version: "test",
		Console: console.SessionOptions{Now: clock.now}}))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	srv2 := newHTTPServer(t, next)
	if res := exchange(t, srv2, code.Code); res.StatusCode != 401 {
		t.Errorf("code of an earlier run: %d", res.StatusCode)
	}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", srv2+"/api/console/overview", nil)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: live})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("cookie of an earlier run: %d", res.StatusCode)
	}
}

// TestConsoleSessionsBounded: codes and sessions are capped, so a flood
// of either holds a fixed amount of memory.
func TestConsoleSessionsBounded(t *testing.T) {
	s := console.NewSessions(console.SessionOptions{})
	var first string
	for i := 0; i < 10*console.MaxCodes; i++ {
		c, _ := s.NewCode()
		if i == 0 {
			first = c
		}
		if i%2 == 0 {
			if _, err := s.Exchange(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, c := s.Count(); n != console.MaxSessions || c > console.MaxCodes {
		t.Fatalf("sessions %d codes %d", n, c)
	}
	if _, err := s.Exchange(first); err == nil {
		t.Fatal("the first code was exchanged twice")
	}
}

// newHTTPServer serves srv on 127.0.0.1 for the test and returns its base URL.
func newHTTPServer(t *testing.T, srv *Server) string {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetListen(strings.TrimPrefix(hs.URL, "http://"))
	return hs.URL
}

// TestConsoleLogJumpToTime: at= starts the page at the last event at or
// before that time (the retention model's timestamp index); seq= at that
// seq.
func TestConsoleLogJumpToTime(t *testing.T) {
	tl := newTestLab(t)
	var seqs []uint64
	for _, n := range []string{"a", "b", "c"} {
		if r := tl.do("POST", "/api/feedback", `{"notes":"`+n+`"}`); r.status != 200 {
			t.Fatal(r.status, string(r.body))
		}
		seqs = append(seqs, tl.lastSeq())
		time.Sleep(20 * time.Millisecond) // distinct timestamps (ms) for the jump to tell apart
	}
	ev, err := tl.eng.Log().Read(seqs[1])
	if err != nil {
		t.Fatal(err)
	}
	page := func(q string) []uint64 {
		t.Helper()
		r := tl.do("GET", "/api/console/log?"+q, "")
		var p struct {
			Events []struct {
				Seq uint64 `json:"seq"`
			} `json:"events"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		var out []uint64
		for _, e := range p.Events {
			out = append(out, e.Seq)
		}
		return out
	}
	if got := page("type=feedback.&at=" + strconv.FormatInt(ev.TS, 10)); len(got) != 2 || got[0] != seqs[1] || got[1] != seqs[0] {
		t.Fatalf("at the second feedback's time: %v (feedback seqs %v)", got, seqs)
	}
	if got := page("type=feedback.&seq=" + strconv.FormatUint(seqs[0], 10)); len(got) != 1 || got[0] != seqs[0] {
		t.Fatalf("seq jump: %v", got)
	}
	if r := tl.do("GET", "/api/console/log?at=yesterday", ""); r.status != 400 || r.code() != CodeInvalidArgument {
		t.Fatalf("a bad time: %d %s", r.status, r.body)
	}
}

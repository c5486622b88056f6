package labui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func newHandler(t *testing.T) *Handler {
	t.Helper()
	h, err := New(Options{Version: "9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Result()
}

// TestPageBudget: the page's own JavaScript and CSS stay within UI.md's
// 150 KB (uncompressed).
func TestPageBudget(t *testing.T) {
	h := newHandler(t)
	n := h.AssetBytes()
	t.Logf("page JS+CSS: %d bytes", n)
	if n > 150*1024 {
		t.Fatalf("page JS+CSS is %d bytes, over the 150 KB budget", n)
	}
	if n < 10*1024 {
		t.Fatalf("page JS+CSS is %d bytes: the assets are not embedded", n)
	}
}

// TestShellAndAssets: the shell names every module by the assets'
// version, loads script only from files (no inline script or style), and
// every answer carries the page security headers.
func TestShellAndAssets(t *testing.T) {
	h := newHandler(t)
	res := get(t, h, "/")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET / = %d %v", res.StatusCode, res.Header)
	}
	checkSec := func(path string, res *http.Response) {
		t.Helper()
		if got := res.Header.Get("Content-Security-Policy"); !strings.HasPrefix(got, "default-src 'self'; media-src 'self';") || !strings.Contains(got, "frame-ancestors 'none'") || strings.Contains(got, "unsafe") {
			t.Errorf("%s: CSP %q", path, got)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
	checkSec("/", res)
	if regexp.MustCompile(`<script(?:[^>]*)>[^<]`).Match(body) || strings.Contains(string(body), "style=") || strings.Contains(string(body), "<style") || strings.Contains(string(body), " on") && regexp.MustCompile(` on[a-z]+=`).Match(body) {
		t.Fatalf("the shell has inline script or style:\n%s", body)
	}
	if !strings.Contains(string(body), "v9.9.9") {
		t.Fatalf("the shell does not show the version")
	}
	srcs := regexp.MustCompile(`(?:src|href)="(/ui/[0-9a-f]{16}/[a-z]+\.(?:js|css))"`).FindAllSubmatch(body, -1)
	if len(srcs) < 3 {
		t.Fatalf("the shell names %d assets:\n%s", len(srcs), body)
	}
	for _, m := range srcs {
		p := string(m[1])
		res := get(t, h, p)
		if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s = %d %v", p, res.StatusCode, res.Header)
		}
		checkSec(p, res)
	}
	// Every module the shell does not name directly is reachable too, and
	// a stale version is served but not cached.
	res = get(t, h, "/ui/0000000000000000/review.js")
	if res.StatusCode != 200 || res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("stale version: %d %v", res.StatusCode, res.Header)
	}
	for _, p := range []string{"/ui/x/index.html", "/ui/x/../api.js", "/ui/api.js", "/ui/x/nope.js", "/app.js"} {
		if res := get(t, h, p); res.StatusCode != 404 {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
		}
	}
}

// TestNoHTMLStrings: the modules never parse strings as HTML (innerHTML,
// outerHTML, insertAdjacentHTML, document.write): text reaches the page as
// text only, so a hostile topic cannot become markup.
func TestNoHTMLStrings(t *testing.T) {
	h := newHandler(t)
	for name, b := range h.files {
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
}

// TestPreloadsFirstView: the shell preloads (modulepreload) exactly the
// modules the runs view needs, the static imports of app.js and of
// runs.js, and the data of its first rows (preload as=fetch); the other
// views are imported when shown, so the first rows wait for none of them.
func TestPreloadsFirstView(t *testing.T) {
	h := newHandler(t)
	body, _ := io.ReadAll(get(t, h, "/").Body)
	var pre []string
	for _, m := range regexp.MustCompile(`<link rel="modulepreload" href="/ui/[0-9a-f]{16}/([a-z]+\.js)">`).FindAllSubmatch(body, -1) {
		pre = append(pre, string(m[1]))
	}
	if got, want := strings.Join(pre, " "), "about.js api.js dom.js keys.js live.js runs.js"; got != want {
		t.Errorf("modulepreload: %s, want %s\n%s", got, want, body)
	}
	for _, p := range []string{"/api/config", "/api/health", "/api/runs?limit=50&amp;sort=newest"} {
		if !strings.Contains(string(body), `<link rel="preload" as="fetch" crossorigin href="`+p+`">`) {
			t.Errorf("the shell does not preload %s:\n%s", p, body)
		}
	}
	// The imports are what the files say: a static import of a view
	// module in app.js would make the preloads a lie.
	if g := h.imports("app.js"); strings.Join(g, " ") != "api.js dom.js keys.js live.js prefetch.js" {
		t.Errorf("app.js imports %v statically", g)
	}
}

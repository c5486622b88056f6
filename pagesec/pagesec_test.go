package pagesec

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWrapSetsEveryHeader(t *testing.T) {
	h := Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	want := map[string]string{
		"Content-Security-Policy":    "default-src 'self'; media-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
		"X-Content-Type-Options":     "nosniff",
		"X-Frame-Options":            "DENY",
		"Referrer-Policy":            "no-referrer",
		"Cross-Origin-Opener-Policy": "same-origin",
	}
	for k, v := range want {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if rec.Code != http.StatusTeapot {
		t.Fatalf("status %d", rec.Code)
	}
}

// TestNotFound pins the one answer of a non-API miss: 404, "Not found",
// nine bytes, and no Content-Type (none set, none sniffed).
func TestNotFound(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "text/html")
	NotFound(rec)
	if rec.Code != http.StatusNotFound || rec.Body.String() != "Not found" || rec.Header().Get("Content-Length") != "9" {
		t.Fatalf("%d %q Content-Length %q", rec.Code, rec.Body.String(), rec.Header().Get("Content-Length"))
	}
	if ct := rec.Header().Get("Content-Type"); ct != "" {
		t.Fatalf("Content-Type %q, want none", ct)
	}
}

func TestContentType(t *testing.T) {
	for name, want := range map[string]string{
		"index.html": "text/html; charset=utf-8",
		"app.js":     "text/javascript; charset=utf-8",
		"APP.JS":     "text/javascript; charset=utf-8",
		"lab.css":    "text/css; charset=utf-8",
		"logo.svg":   "image/svg+xml",
		"a/b.png":    "image/png",
		"x.ico":      "image/x-icon",
		"data.json":  "application/octet-stream",
		"noext":      "application/octet-stream",
	} {
		if got := ContentType(name); got != want {
			t.Errorf("ContentType(%q) = %q, want %q", name, got, want)
		}
	}
}

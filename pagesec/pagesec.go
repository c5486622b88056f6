package pagesec

import (
	"io"
	"net/http"
	"path"
	"strings"
)

// CSP is the Content-Security-Policy of every embedded page.
const CSP = "default-src 'self'; media-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Set writes the page security headers into h.
func Set(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// Wrap serves next with the page security headers set on every answer.
func Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Set(w.Header())
		next.ServeHTTP(w, r)
	})
}

// NotFound is the answer of a path outside /api/ that serves nothing, the
// same for every page and for content-machine's client (whose server
// answers so): 404, body "Not found", no Content-Type, not even a sniffed
// one.
func NotFound(w http.ResponseWriter) {
	w.Header()["Content-Type"] = nil
	w.Header().Set("Content-Length", "9")
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, "Not found")
}

// ContentType is the Content-Type a page's file is served with, by its
// extension (case-folded); any other is application/octet-stream. With
// nosniff set, a browser runs or applies a file by this type only.
func ContentType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".ico":
		return "image/x-icon"
	}
	return "application/octet-stream"
}

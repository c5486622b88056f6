package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/cmlab/cmlab/pagesec"
)

// static holds the console's pages: index.html (the one HTML shell),
// console.css, and the ES modules under js/ (one per view). No build
// step: these files are what the browser runs.
//
//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every console answer, the one the
// Lab page has (package pagesec): nothing but this daemon's own files, no
// inline script or style, no framing.
const CSP = pagesec.CSP

// SecurityHeaders sets the headers every console answer carries: the
// pages' (pagesec) and a window of its own (no opener).
func SecurityHeaders(h http.Header) {
	pagesec.Set(h)
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// ServeAsset answers GET /console/{name}: "" is index.html. It reports
// false when there is no such file (the caller answers 404).
func ServeAsset(w http.ResponseWriter, r *http.Request, name string) bool {
	if name == "" || strings.HasSuffix(name, "/") {
		name = "index.html"
	}
	name = path.Clean("/" + name)[1:]
	b, err := fs.ReadFile(static, "static/"+name)
	if name == "term.css" {
		b, err = []byte(TermCSS()), nil
	}
	if err != nil {
		return false
	}
	h := w.Header()
	SecurityHeaders(h)
	h.Set("Content-Type", pagesec.ContentType(name))
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
	return true
}

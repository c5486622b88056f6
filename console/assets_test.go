package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestServeAssetTypes: every kind of file the console serves answers with
// the pages' content type (pagesec.ContentType), whatever the machine's
// MIME table says, and with the security headers; a missing file is not
// answered.
func TestServeAssetTypes(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"", "text/html; charset=utf-8"},
		{"index.html", "text/html; charset=utf-8"},
		{"console.css", "text/css; charset=utf-8"},
		{"term.css", "text/css; charset=utf-8"},
		{"js/app.js", "text/javascript; charset=utf-8"},
	} {
		w := httptest.NewRecorder()
		if !ServeAsset(w, httptest.NewRequest(http.MethodGet, "/console/"+c.name, nil), c.name) {
			t.Errorf("%q: not served", c.name)
			continue
		}
		if got := w.Header().Get("Content-Type"); got != c.want {
			t.Errorf("%q: Content-Type %q, want %q", c.name, got, c.want)
		}
		if w.Header().Get("Content-Security-Policy") != CSP || w.Body.Len() == 0 {
			t.Errorf("%q: CSP %q, %d bytes", c.name, w.Header().Get("Content-Security-Policy"), w.Body.Len())
		}
	}
	if ServeAsset(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/console/nope.js", nil), "nope.js") {
		t.Error("a missing file was served")
	}
}

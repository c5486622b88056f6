package labapi

import "testing"

// TestUIContentType pins content-machine's table (contentTypeForPath),
// which the client of Options.UIDir is served with.
func TestUIContentType(t *testing.T) {
	for name, want := range map[string]string{
		"index.html":  "text/html; charset=utf-8",
		"INDEX.HTM":   "application/octet-stream",
		"app.js":      "application/javascript; charset=utf-8",
		"lab/App.JS":  "application/javascript; charset=utf-8",
		"app.css":     "text/css; charset=utf-8",
		"icon.svg":    "image/svg+xml",
		"shot.PNG":    "image/png",
		"favicon.ico": "image/x-icon",
		"app.js.map":  "application/octet-stream",
		"README":      "application/octet-stream",
	} {
		if got := uiContentType(name); got != want {
			t.Errorf("uiContentType(%q) = %q, want %q", name, got, want)
		}
	}
}

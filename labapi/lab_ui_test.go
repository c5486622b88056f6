package labapi

import (
	"testing"

	"github.com/cmlab/cmlab/pagesec"
)

// TestUIContentType holds content-machine's table (contentTypeForPath),
// which the client of Options.UIDir is served with, to the pages' own
// (pagesec.ContentType, whose test pins it) but for JavaScript.
func TestUIContentType(t *testing.T) {
	for _, name := range []string{"app.js", "lab/App.JS"} {
		if got := uiContentType(name); got != "application/javascript; charset=utf-8" {
			t.Errorf("uiContentType(%q) = %q, want application/javascript", name, got)
		}
	}
	for _, name := range []string{"index.html", "INDEX.HTM", "app.css", "icon.svg", "shot.PNG", "favicon.ico", "app.js.map", "README"} {
		if got, want := uiContentType(name), pagesec.ContentType(name); got != want {
			t.Errorf("uiContentType(%q) = %q, want %q", name, got, want)
		}
	}
}

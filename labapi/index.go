package labapi

import (
	"bytes"
	_ "embed"
	"html/template"
	"net/http"
)

// Without --ui, GET / answers a small page saying what this daemon is and
// linking its health, config and metrics — instead of a bare 404 for
// someone who opens the address in a browser.

//go:embed static/index.html
var indexHTML string

var indexTmpl = template.Must(template.New("index").Parse(indexHTML))

func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) error {
	var b bytes.Buffer
	if err := indexTmpl.Execute(&b, map[string]any{"Version": Version, "SessionID": s.opts.SessionID, "ReadOnly": s.opts.ReadOnly}); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b.Bytes())
	return err
}

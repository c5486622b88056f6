package labapi

import (
	"net/http"
	"regexp"
	"sync"
)

// exportName is a file POST /api/export writes by default (export-<session>-<ms>.json)
// or any plain JSON file name directly in lab/exports/.
var exportName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.json$`) })

// handleExportDownload (an extension): GET /api/exports/{name} downloads a
// file of lab/exports/ — the one POST /api/export just wrote — as an
// attachment, so the browser can save a session's export. Only plain
// names directly in the exports directory, opened through package confine
// (no symlink, regular files only).
func (s *Server) handleExportDownload(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	notFound := NewError(CodeNotFound, "Export not found: "+truncate(name, 140), "Write it first with POST /api/export {sessionId}, then download the file its answer names.").With("name", truncate(name, 140))
	if !exportName().MatchString(name) {
		return notFound
	}
	found, err := serveFile(w, r, s.opts.Engine.Home().ExportsDir(), name, func(h http.Header) {
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	})
	if !found && err == nil {
		return notFound
	}
	return err
}

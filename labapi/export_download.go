package labapi

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"

	"github.com/cmlab/cmlab/confine"
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
	f, err := confine.Open(s.opts.Engine.Home().ExportsDir(), name)
	if err != nil {
		if ae := transientFileError(err); ae != nil {
			return ae
		}
		return notFound
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return notFound
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	h.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		io.Copy(w, f)
	}
	return nil
}

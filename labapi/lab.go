package labapi

import (
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/pagesec"
	"github.com/google/uuid"
)

// registerLabRoutes registers the Lab routes of SPEC §6.
func (s *Server) registerLabRoutes() {
	s.route("GET /api/config", authNone, s.handleConfig)
	s.route("GET /api/health", authNone, s.handleHealth)
	s.route("GET /metrics", authAlways, s.handleMetrics)
	s.route("GET /api/session", authPostOnly, s.handleSession)

	s.route("GET /api/feedback", authPostOnly, s.handleFeedbackPoll)
	s.route("POST /api/feedback", authPostOnly, s.handleFeedbackAdd)

	s.route("POST /api/runs/import", authPostOnly, s.handleRunsImport)
	s.route("GET /api/runs", authPostOnly, s.handleRunsList)
	s.route("GET /api/runs/{runId}", authPostOnly, s.handleRunGet)
	s.route("GET /api/runs/{runId}/video", authPostOnly, s.handleRunVideo)
	s.route("GET /api/runs/{runId}/artifact/{name}", authPostOnly, s.handleRunArtifact)
	s.route("GET /api/runs/{runId}/feedback", authPostOnly, s.handleRunFeedback) // feedback_index.go

	s.route("POST /api/experiments", authPostOnly, s.handleExperimentCreate)
	s.route("GET /api/experiments", authPostOnly, s.handleExperimentsList)
	s.route("GET /api/experiments/{experimentId}", authPostOnly, s.handleExperimentGet)
	s.route("POST /api/experiments/{experimentId}/submit", authPostOnly, s.handleExperimentSubmit)

	s.route("POST /api/export", authPostOnly, s.handleExport)
	s.route("GET /api/exports/{name}", authPostOnly, s.handleExportDownload) // export_download.go

	if s.opts.UIDir != "" {
		// content-machine's layout (src/lab/server/static.ts): the page at
		// / and /index.html, its assets under /lab/ (index.html loads
		// /lab/app.css and /lab/app.js).
		s.route("GET /{$}", authNone, s.handleUI)
		s.route("GET /index.html", authNone, s.handleUI)
		s.route("GET /lab/{path...}", authNone, s.handleUI)
	} else if s.opts.Page != nil {
		// cmlab's own Lab (package labui): the page at /, its assets under /ui/.
		page := func(w http.ResponseWriter, r *http.Request) error { s.opts.Page.ServeHTTP(w, r); return nil }
		s.route("GET /{$}", authNone, s.handlePage) // lab_firstpage.go: the first runs in the HTML
		s.route("GET /ui/{path...}", authNone, page)
	}
}

// handleUI serves the Lab's browser client from Options.UIDir as
// content-machine does: 200 with its Content-Type table and Cache-Control
// no-store, or the plain-text 404 of every non-API path. Files are opened
// inside UIDir (package confine: no "..", no symlink, regular files only); names
// starting with a dot are not served.
func (s *Server) handleUI(w http.ResponseWriter, r *http.Request) error {
	rel := "index.html"
	if strings.HasPrefix(r.URL.Path, "/lab/") {
		rel = r.PathValue("path")
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "" || strings.HasPrefix(seg, ".") {
			pagesec.NotFound(w)
			return nil
		}
	}
	dir, err := filepath.EvalSymlinks(s.opts.UIDir)
	if err == nil {
		dir, err = filepath.Abs(dir)
	}
	if err != nil {
		pagesec.NotFound(w)
		return nil
	}
	found, err := serveFile(w, r, dir, rel, func(h http.Header) {
		h.Set("Content-Type", uiContentType(rel))
		h.Set("Cache-Control", "no-store")
	})
	if !found && err == nil {
		pagesec.NotFound(w)
	}
	return err
}

// serveFile answers r with the regular file name beneath dir, opened once
// through package confine (no "..", no symlink, never a FIFO or device,
// which would block the request's thread): 200 with the headers header
// sets and the file's Content-Length, the bytes unless r is a HEAD.
// found is false when there is no such file, for the caller to answer; a
// failure that is not the file's (out of descriptors) is err.
func serveFile(w http.ResponseWriter, r *http.Request, dir, name string, header func(http.Header)) (found bool, err error) {
	f, err := confine.Open(dir, name)
	if err != nil {
		if ae := transientFileError(err); ae != nil {
			return false, ae
		}
		return false, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false, nil
	}
	header(w.Header())
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		io.Copy(w, f)
	}
	return true, nil
}

// uiContentType is content-machine's table (contentTypeForPath): the
// pages' own (pagesec.ContentType) but for JavaScript, which
// content-machine serves as application/javascript.
func uiContentType(name string) string {
	if strings.EqualFold(filepath.Ext(name), ".js") {
		return "application/javascript; charset=utf-8"
	}
	return pagesec.ContentType(name)
}

func newID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		return prefix + uuid.NewString()
	}
	return prefix + id.String()
}

package labapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
)

// The Lab page at / with its first rows in the HTML (package labui): the
// first screenful of runs is painted from the document and its style
// sheet, without waiting for the page's modules and a request of its own.

// FirstRunsQuery is the query of the runs the Lab page opens on, GET
// /api/runs?limit=50&sort=newest: what a page at / shows first.
const FirstRunsQuery = "limit=50&sort=newest"

// RunsPage is a Page (Options.Page) that can hold the first page of runs
// in the HTML it answers at /.
type RunsPage interface {
	http.Handler
	// ServeWithRuns answers GET / with runs, the body of GET
	// /api/runs?FirstRunsQuery answered now, and roots, the import roots
	// /api/config names; runs nil is the page without rows.
	ServeWithRuns(w http.ResponseWriter, r *http.Request, runs []byte, roots []string)
}

// handlePage answers GET / with Options.Page. The page holds the first
// runs only where GET /api/runs would answer them: serveHTTP's Host and
// Origin guard ran before it for / as for every route, and a read of a Lab
// route asks no token (route, authPostOnly), so the rows widen nothing.
// A one-shot task opens straight into its review or comparison (app.js):
// its page has no rows, nor has one whose runs cannot be read now (the
// page then asks for them itself and shows the API's error).
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) error {
	p, ok := s.opts.Page.(RunsPage)
	if !ok {
		s.opts.Page.ServeHTTP(w, r)
		return nil
	}
	var runs []byte
	if s.opts.Task == nil {
		var err error
		if runs, err = s.firstRuns(); err != nil {
			s.log.Warn("the Lab page's first runs", "err", err)
			runs = nil
		}
	}
	p.ServeWithRuns(w, r, runs, s.opts.AllowedRoots)
	return nil
}

// firstRuns is the body GET /api/runs?FirstRunsQuery answers now, byte for
// byte: the same handler writes it.
func (s *Server) firstRuns() ([]byte, error) {
	v, err := url.ParseQuery(FirstRunsQuery)
	if err != nil {
		return nil, err
	}
	lq, _, err := parseListQuery(v, runSorts...)
	if err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	if err := s.handleRunsPage(rec, lq); err != nil {
		return nil, err
	}
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("the runs page answered %d: %s", rec.Code, bytes.TrimSpace(rec.Body.Bytes()))
	}
	return rec.Body.Bytes(), nil
}

package labapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/events"
)

// The paging extension of the list routes (GET /api/runs, GET
// /api/experiments). content-machine's lists answer every record at once
// with nextCursor null; a home of 10,000 runs makes that a megabyte per
// look. With any of these query parameters the answer is one page:
//
//	limit   1–500 items (default 50)
//	after   the nextCursor of the previous page: the id of its last item;
//	        the page continues after it in the same order, so records
//	        appended meanwhile neither repeat nor shift the pages
//	q       case-insensitive substring of the topic, the id or the
//	        artifacts directory (runs) / the name (experiments)
//	sort    runs: newest (default), oldest, topic, sync, caption, score;
//	        experiments: newest (default), oldest, name
//	unrated runs only: 1 keeps the runs no feedback entry names
//
// and it is {items, nextCursor: id|null, total}: total counts the records
// the filter keeps. Each run item also carries feedbackCount. Without
// these parameters the answer is content-machine's, byte for byte.

const (
	defaultPageLimit = 50
	maxPageLimit     = 500
)

// listQuery is a parsed paging request.
type listQuery struct {
	limit   int
	after   string
	q       string
	sort    string
	unrated bool
}

var pagingParams = []string{"limit", "after", "q", "sort", "unrated"}

// parseListQuery reports whether the request asks for a page, and which.
func parseListQuery(v url.Values, sorts ...string) (listQuery, bool, error) {
	paged := false
	for _, p := range pagingParams {
		paged = paged || v.Has(p)
	}
	if !paged {
		return listQuery{}, false, nil
	}
	lq := listQuery{limit: defaultPageLimit, after: strings.TrimSpace(v.Get("after")),
		q: strings.ToLower(strings.TrimSpace(v.Get("q"))), sort: strings.TrimSpace(v.Get("sort"))}
	if s := strings.TrimSpace(v.Get("limit")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return lq, true, NewError(CodeInvalidArgument, "limit must be a whole number from 1 to 500, not "+strconv.Quote(truncate(s, 40)), "Send limit=50 (at most 500).").With("field", "limit")
		}
		lq.limit = min(n, maxPageLimit)
	}
	if lq.sort == "" {
		lq.sort = "newest"
	}
	ok := false
	for _, s := range sorts {
		ok = ok || s == lq.sort
	}
	if !ok {
		return lq, true, NewError(CodeInvalidArgument, "Unknown sort "+strconv.Quote(truncate(lq.sort, 40)), "Sort by one of: "+strings.Join(sorts, ", ")+".").With("field", "sort")
	}
	switch u := v.Get("unrated"); u {
	case "", "0", "false":
	case "1", "true":
		lq.unrated = true
	default:
		return lq, true, NewError(CodeInvalidArgument, "unrated must be 1 or 0", "Send unrated=1 to list the runs no feedback names.").With("field", "unrated")
	}
	return lq, true, nil
}

var runSorts = []string{"newest", "oldest", "topic", "sync", "caption", "score"}

// metricOf is a run's metric for sorting; runs without it sort last.
func metricOf(r events.LabRun, key string) (float64, bool) {
	m := r.AutoMetricsSummary
	if m == nil {
		return 0, false
	}
	var p *int
	switch key {
	case "sync":
		p = m.SyncRating
	case "caption":
		p = m.CaptionOverall
	case "score":
		p = m.ProxyScoreOverall
	}
	if p == nil {
		return 0, false
	}
	return float64(*p), true
}

func (s *Server) handleRunsPage(w http.ResponseWriter, lq listQuery) error {
	var counts map[string]int
	if lq.unrated {
		var err error
		if counts, err = s.fbIndex.counts(); err != nil {
			return err
		}
	}
	st := s.lab
	simple := lq.q == "" && !lq.unrated && (lq.sort == "newest" || lq.sort == "oldest")
	page, total, err := findPage(st, lsRuns, lsRunIdx, lq, simple,
		func() (int, error) { n, _, err := st.counts(); return n, err },
		st.run, runsPageFilter(lq, counts), runsPageOrder(lq.sort))
	if err != nil {
		return labStoreError(err)
	}
	page, next := cutPage(page, lq.limit, func(r *events.LabRun) string { return r.RunID })
	if counts == nil {
		ids := make([]string, len(page))
		for i, e := range page {
			ids[i] = e.rec.RunID
		}
		if counts, err = s.fbIndex.countsOf(ids); err != nil {
			return err
		}
	}
	writePage(w, page, next, total, func(r *events.LabRun) map[string]any {
		item := runListItem(r)
		item["feedbackCount"] = counts[r.RunID]
		return item
	})
	return nil
}

var experimentSorts = []string{"newest", "oldest", "name"}

func (s *Server) handleExperimentsPage(w http.ResponseWriter, lq listQuery) error {
	if lq.unrated {
		return NewError(CodeInvalidArgument, "unrated applies to runs only", "Drop unrated= from GET /api/experiments.").With("field", "unrated")
	}
	st := s.lab
	simple := lq.q == "" && (lq.sort == "newest" || lq.sort == "oldest")
	page, total, err := findPage(st, lsExps, lsExpIdx, lq, simple,
		func() (int, error) { _, n, err := st.counts(); return n, err },
		st.experiment, experimentsPageFilter(lq), experimentsPageOrder(lq.sort))
	if err != nil {
		return labStoreError(err)
	}
	page, next := cutPage(page, lq.limit, func(e *events.LabExperiment) string { return e.ExperimentID })
	writePage(w, page, next, total, func(e *events.LabExperiment) map[string]any {
		item := experimentListItem(e)
		item["runCount"] = 1 + len(e.Variants)
		return item
	})
	return nil
}

// cutPage cuts a page found with one entry more than limit, which means
// there is a next page: next is then its cursor, the id of the last
// entry kept, else "".
func cutPage[T any](page []*pageEntry[T], limit int, id func(*T) string) ([]*pageEntry[T], string) {
	if len(page) <= limit {
		return page, ""
	}
	page = page[:limit]
	return page, id(&page[len(page)-1].rec)
}

// writePage answers a page: {items, nextCursor: id|null, total}.
func writePage[T any](w http.ResponseWriter, page []*pageEntry[T], next string, total int, item func(*T) map[string]any) {
	items := make([]map[string]any, 0, len(page))
	for _, e := range page {
		items = append(items, item(&e.rec))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": nullable(next), "total": total})
}

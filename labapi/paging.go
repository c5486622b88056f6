package labapi

import (
	"net/http"
	"net/url"
	"sort"
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

// pageAfter cuts items (already filtered and ordered) to the page after
// the item whose id is lq.after.
func pageAfter[T any](items []T, id func(T) string, lq listQuery) ([]T, string, error) {
	start := 0
	if lq.after != "" {
		start = -1
		for i, it := range items {
			if id(it) == lq.after {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, "", NewError(CodeInvalidCursor, "Cursor "+strconv.Quote(truncate(lq.after, 140))+" names no item of this list", "Use the nextCursor of the previous page, or drop after= to start over.").With("after", truncate(lq.after, 140))
		}
	}
	end := min(start+lq.limit, len(items))
	page := items[start:end]
	next := ""
	if end < len(items) && len(page) > 0 {
		next = id(page[len(page)-1])
	}
	return page, next, nil
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
	runs := s.lab.runList() // newest first
	var counts map[string]int
	if lq.unrated {
		var err error
		if counts, err = s.fbIndex.counts(); err != nil {
			return err
		}
	}
	kept := runs[:0]
	for _, r := range runs {
		if lq.q != "" && !strings.Contains(strings.ToLower(r.Topic), lq.q) && !strings.Contains(strings.ToLower(r.RunID), lq.q) &&
			!strings.Contains(strings.ToLower(r.ArtifactsDir), lq.q) {
			continue
		}
		if lq.unrated && counts[r.RunID] > 0 {
			continue
		}
		kept = append(kept, r)
	}
	switch lq.sort {
	case "oldest":
		for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
			kept[i], kept[j] = kept[j], kept[i]
		}
	case "topic":
		sort.SliceStable(kept, func(i, j int) bool { return strings.ToLower(kept[i].Topic) < strings.ToLower(kept[j].Topic) })
	case "sync", "caption", "score":
		sort.SliceStable(kept, func(i, j int) bool {
			a, okA := metricOf(kept[i], lq.sort)
			b, okB := metricOf(kept[j], lq.sort)
			if okA != okB {
				return okA
			}
			return a > b
		})
	}
	page, next, err := pageAfter(kept, func(r events.LabRun) string { return r.RunID }, lq)
	if err != nil {
		return err
	}
	ids := make([]string, len(page))
	for i, r := range page {
		ids[i] = r.RunID
	}
	if counts == nil {
		if counts, err = s.fbIndex.countsOf(ids); err != nil {
			return err
		}
	}
	items := make([]map[string]any, 0, len(page))
	for _, run := range page {
		items = append(items, map[string]any{
			"runId": run.RunID, "sessionId": run.SessionID, "createdAt": run.CreatedAt,
			"topic": nullable(run.Topic), "artifactsDir": run.ArtifactsDir, "videoPath": nullable(run.VideoPath),
			"autoMetricsSummary": summaryOrNulls(run.AutoMetricsSummary), "feedbackCount": counts[run.RunID],
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": nullable(next), "total": len(kept)})
	return nil
}

var experimentSorts = []string{"newest", "oldest", "name"}

func (s *Server) handleExperimentsPage(w http.ResponseWriter, lq listQuery) error {
	if lq.unrated {
		return NewError(CodeInvalidArgument, "unrated applies to runs only", "Drop unrated= from GET /api/experiments.").With("field", "unrated")
	}
	exps := s.lab.experimentList()
	kept := exps[:0]
	for _, e := range exps {
		if lq.q != "" && !strings.Contains(strings.ToLower(e.Name), lq.q) && !strings.Contains(strings.ToLower(e.ExperimentID), lq.q) &&
			!strings.Contains(strings.ToLower(e.Topic), lq.q) {
			continue
		}
		kept = append(kept, e)
	}
	switch lq.sort {
	case "oldest":
		for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
			kept[i], kept[j] = kept[j], kept[i]
		}
	case "name":
		sort.SliceStable(kept, func(i, j int) bool { return strings.ToLower(kept[i].Name) < strings.ToLower(kept[j].Name) })
	}
	page, next, err := pageAfter(kept, func(e events.LabExperiment) string { return e.ExperimentID }, lq)
	if err != nil {
		return err
	}
	items := make([]map[string]any, 0, len(page))
	for _, e := range page {
		items = append(items, map[string]any{"experimentId": e.ExperimentID, "sessionId": e.SessionID,
			"createdAt": e.CreatedAt, "name": e.Name, "topic": nullable(e.Topic), "status": e.Status,
			"runCount": 1 + len(e.Variants)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": nullable(next), "total": len(kept)})
	return nil
}

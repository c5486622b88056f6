package labapi

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// runsPageProbe is a RunsPage that answers what it was handed.
type runsPageProbe struct {
	mu    sync.Mutex
	calls int
}

func (p *runsPageProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, "page without rows")
}

func (p *runsPageProbe) ServeWithRuns(w http.ResponseWriter, r *http.Request, runs []byte, roots []string) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	if runs == nil {
		fmt.Fprintf(w, "no rows; roots %q", roots)
		return
	}
	fmt.Fprintf(w, "roots %q; runs %s", roots, runs)
}

// TestPageHoldsTheFirstRuns: GET / hands a RunsPage the body GET
// /api/runs?limit=50&sort=newest answers, byte for byte, and the import
// roots of /api/config; / is refused where the Lab routes are (Host,
// Origin), so the rows reach no one the API would not answer; a one-shot
// task's page has no rows; a Page that is no RunsPage is served as it is.
func TestPageHoldsTheFirstRuns(t *testing.T) {
	probe := &runsPageProbe{}
	tl := newTestLab(t, func(o *Options) { o.Page = probe })
	for i := range 3 {
		tl.importRun(tl.mkRun(fmt.Sprintf("run-%d", i), map[string]string{"script.json": fmt.Sprintf(`{"meta":{"topic":"topic %d <b>"}}`, i)}))
	}
	api := tl.do("GET", "/api/runs?"+FirstRunsQuery, "", "X-CM-LAB-TOKEN", "")
	page := tl.do("GET", "/", "", "X-CM-LAB-TOKEN", "")
	if api.status != 200 || page.status != 200 {
		t.Fatalf("GET /api/runs = %d, GET / = %d", api.status, page.status)
	}
	if want := fmt.Sprintf("roots %q; runs %s", []string{tl.root}, api.body); string(page.body) != want {
		t.Fatalf("GET / handed the page\n%s\nwant\n%s", page.body, want)
	}

	// Refused as the Lab routes are: a foreign Host, a foreign Origin.
	for _, hdr := range [][]string{{"Host", "evil.example:80"}, {"Origin", "http://evil.example"}} {
		before := probe.calls
		r := tl.do("GET", "/", "", append([]string{"X-CM-LAB-TOKEN", ""}, hdr...)...)
		a := tl.do("GET", "/api/runs?"+FirstRunsQuery, "", append([]string{"X-CM-LAB-TOKEN", ""}, hdr...)...)
		if r.status != 403 || a.status != 403 || probe.calls != before || strings.Contains(string(r.body), "topic") {
			t.Errorf("%s: GET / = %d %s (page called %d times), GET /api/runs = %d: want both refused, the page not called", hdr, r.status, r.body, probe.calls-before, a.status)
		}
	}

	task := newTestLab(t, func(o *Options) { o.Page = probe; o.Task = &Task{Type: "review", RunID: "run_x"} })
	if r := task.do("GET", "/", ""); r.status != 200 || string(r.body) != fmt.Sprintf("no rows; roots %q", []string{task.root}) {
		t.Errorf("a one-shot task's GET / = %d %s, want the page without rows", r.status, r.body)
	}

	plain := newTestLab(t, func(o *Options) { o.Page = http.HandlerFunc(probe.ServeHTTP) })
	if r := plain.do("GET", "/", ""); r.status != 200 || string(r.body) != "page without rows" {
		t.Errorf("a Page that is no RunsPage: GET / = %d %s", r.status, r.body)
	}
}

package labui

import (
	"fmt"
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

func runsAnswerOf(n, total int, topic func(i int) string) string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"runId":"run_%02d","sessionId":"s","createdAt":"2026-12-07T16:%02d:00.000Z","topic":%q,"artifactsDir":"/r","videoPath":null,"autoMetricsSummary":{"syncRating":%d,"captionOverall":null,"proxyScoreOverall":null},"feedbackCount":%d}`, i, i%60, topic(i), 50+i, i%2))
	}
	next := "null"
	if total > n {
		next = fmt.Sprintf(`"run_%02d"`, n-1)
	}
	return fmt.Sprintf(`{"items":[%s],"nextCursor":%s,"total":%d}`, strings.Join(items, ","), next, total)
}

// TestServeWithRuns: the page served with the first runs holds the runs
// view with the first screenful of rows (24), every string of a run as
// text, the answer itself for runs.js (main's data-runs), no preload of
// the runs it holds and the route check before the body; a page that fits
// the screenful has its status line; without runs, or with runs it
// cannot read, it is the page without rows.
func TestServeWithRuns(t *testing.T) {
	h := newHandler(t)
	const hostile = `<img src=x onerror=alert(1)>`
	serve := func(runs []byte, roots []string) string {
		rec := httptest.NewRecorder()
		h.ServeWithRuns(rec, httptest.NewRequest("GET", "/", nil), runs, roots)
		res := rec.Result()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || res.Header.Get("Cache-Control") != "no-store" ||
			!strings.HasPrefix(res.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("GET / with runs = %d %v", res.StatusCode, res.Header)
		}
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	page := serve([]byte(runsAnswerOf(50, 10000, func(i int) string { return fmt.Sprintf("topic %d %s", i, hostile) })), []string{"/runs/<b>"})
	rows := regexp.MustCompile(`<tr data-run="run_\d\d" data-index="\d+">`).FindAllString(page, -1)
	if len(rows) != firstScreenRows || strings.Count(page, `elementtiming="cmlab-first-rows"`) != firstScreenRows {
		t.Errorf("%d rows, %d tagged for their paint; want %d", len(rows), strings.Count(page, `elementtiming="cmlab-first-rows"`), firstScreenRows)
	}
	if strings.Contains(page, hostile) || strings.Contains(page, "<b>") || !strings.Contains(page, `class="run-link">topic 0 &lt;img src=x onerror=alert(1)&gt;</a>`) ||
		!strings.Contains(page, `<code>/runs/&lt;b&gt;</code>`) {
		t.Errorf("a run's strings are not text:\n%s", page)
	}
	for _, want := range []string{
		`<html lang="en" data-served="runs">`,
		`<script src="/ui/` + h.version + `/route.js"></script>`,
		`<main id="app" tabindex="-1" data-runs="{&#34;items&#34;:[{&#34;runId&#34;:&#34;run_00&#34;`,
		`<p id="runsStatus" class="muted" aria-live="polite">Loading runs…</p>`,
		`<span class="badge badge-bad" title="sync 50 of 100">✗ sync 50/100</span><span class="badge">caption n/a</span><span class="badge">score n/a</span>`,
		`<td><span class="unrated">unrated</span></td>`, `<td>rated 1×</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, `href="/api/runs`) || strings.Contains(page, "Loading…</p>") {
		t.Errorf("the page with rows preloads the runs or shows the shell's placeholder")
	}

	small := serve([]byte(runsAnswerOf(3, 3, func(int) string { return "" })), nil)
	for _, want := range []string{`(no topic)</a>`, `aria-label="Pick run_02 for compare"`, `Allowed roots: none — start`,
		`<p id="runsStatus" class="muted" aria-live="polite">Showing 3 of 3 runs.</p><nav class="pager" aria-label="Pages of runs"></nav>`} {
		if !strings.Contains(small, want) {
			t.Errorf("the page of 3 runs lacks %s", want)
		}
	}
	empty := serve([]byte(`{"items":[],"nextCursor":null,"total":0}`), nil)
	if !strings.Contains(empty, `<p id="runsStatus" class="muted" aria-live="polite" elementtiming="cmlab-first-rows">No runs yet: import one above, or let an agent import them.</p>`) {
		t.Errorf("the empty home's page:\n%s", empty)
	}
	for _, runs := range [][]byte{nil, []byte(`{"items":`)} {
		if got := serve(runs, nil); got != string(h.shell) {
			t.Errorf("runs %q: not the page without rows:\n%s", runs, got)
		}
	}
}

// TestRowText: what a row says is what dom.js says for the same run.
func TestRowText(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	iso := func(d time.Duration) *string { s := now.Add(-d).Format("2006-01-02T15:04:05.000Z"); return &s }
	for _, c := range []struct {
		at   *string
		want string
	}{
		{iso(44 * time.Second), "just now"}, {iso(45 * time.Second), "1 min ago"}, {iso(89 * time.Second), "1 min ago"},
		{iso(90 * time.Second), "2 min ago"}, {iso(59*time.Minute + 59*time.Second), "60 min ago"}, {iso(90 * time.Minute), "2 h ago"},
		{iso(36 * time.Hour), "2 d ago"}, {iso(31 * 24 * time.Hour), "2026-11-06"}, {iso(-time.Hour), "just now"},
	} {
		if got := relTime(c.at, now); !got.Time || got.Text != c.want || got.ISO != *c.at {
			t.Errorf("relTime(%s) = %+v, want %q", *c.at, got, c.want)
		}
	}
	for _, s := range []string{"", "yesterday"} {
		want := s
		if s == "" {
			want = "—"
		}
		if got := relTime(&s, now); got.Time || got.Text != want {
			t.Errorf("relTime(%q) = %+v, want a span of %q", s, got, want)
		}
	}
	f := func(x float64) *float64 { return &x }
	for _, c := range []struct {
		label, unit string
		v           *float64
		want        badgeView
	}{
		{"sync", "/100", nil, badgeView{"badge", "", "sync n/a"}},
		{"sync (good)", "/100", f(79.5), badgeView{"badge badge-ok", "sync (good) 80 of 100", "✓ sync (good) 80/100"}},
		{"caption", "/100", f(60), badgeView{"badge badge-warn", "caption 60 of 100", "~ caption 60/100"}},
		{"score", "/100", f(-0.4), badgeView{"badge badge-bad", "score 0 of 100", "✗ score 0/100"}},
		{"drift", " ms", f(12.5), badgeView{"badge", "", "drift 13 ms"}},
	} {
		if got := badge(c.label, c.v, c.unit); got != c.want {
			t.Errorf("badge(%s, %v) = %+v, want %+v", c.label, c.v, got, c.want)
		}
	}
	if got := shortID("run_0198abcdef0123456789"); got != "run_0198ab…6789" {
		t.Errorf("shortID = %q", got)
	}
	if got := encodeURIComponent("run_a.b-c~!*'() /é"); got != "run_a.b-c~!*'()%20%2F%C3%A9" {
		t.Errorf("encodeURIComponent = %q", got)
	}
}

// TestPageWithRowsStartsItsModulesLate: the page with rows names the same
// preloads and modules as the page without, but inert, in
// template#modules, for route.js to start once the first rows are
// painted; nothing but lab.css and route.js is asked for before.
func TestPageWithRowsStartsItsModulesLate(t *testing.T) {
	h := newHandler(t)
	page, err := h.withRuns([]byte(runsAnswerOf(50, 10000, func(i int) string { return fmt.Sprint("topic ", i) })), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(page), "</head>")
	before, rest, ok := strings.Cut(head, "<template id=\"modules\">\n")
	inert, after, ok2 := strings.Cut(rest, "</template>\n")
	if !ok || !ok2 {
		t.Fatalf("no template#modules in the head:\n%s", head)
	}
	// What the page without rows starts at once, less the runs it holds.
	shell := string(h.shell)
	want := shell[strings.Index(shell, `<link rel="preload"`):strings.Index(shell, "</head>")]
	want = strings.Replace(want, "<link rel=\"preload\" as=\"fetch\" crossorigin href=\"/api/runs?limit=50&amp;sort=newest\">\n", "", 1)
	if inert != want {
		t.Errorf("template#modules holds\n%s\nwant\n%s", inert, want)
	}
	if after != `<script src="/ui/`+h.version+`/route.js"></script>`+"\n" {
		t.Errorf("after the template: %q, want route.js alone", after)
	}
	for _, s := range []string{"<script", "preload"} {
		if strings.Contains(before, s) {
			t.Errorf("the head asks for more than lab.css before the template:\n%s", before)
		}
	}
}

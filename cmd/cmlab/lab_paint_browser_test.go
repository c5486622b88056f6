package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"
)

// The first useful paint of the Lab page: how long, from navigation
// start, until the first screenful of run rows is on the screen. The page
// marks it itself (performance.mark 'cmlab-first-rows') at the time the
// browser recorded for the paint of those rows (Element Timing: the rows
// carry elementtiming="cmlab-first-rows"; the server renders the first
// screenful into the HTML, labui), and the test reads the mark and checks
// that an element-timing entry of the same time backs it.
//
// Three kinds of visit are measured, because they answer different
// questions:
//   - cold browser: the first navigation of a Chromium just started (its
//     own process start, its network service, a renderer for the site);
//   - new context: a first visit in a new browser context of a running
//     browser, nothing warmed (the figure of earlier sessions: it still
//     pays for the context's network stack and renderer process);
//   - warm browser: a new browser context that first opened a page of
//     another origin, as a person's running browser has, so the browser's
//     own start-up is not counted; our page's cache, connections and
//     storage are still empty. This is the first visit the budget holds,
//     with the reload that follows it (assets cached).

// paintVisits is how many first visits (and as many reloads) the paint
// figures are the median of (CMLAB_PAINT_VISITS sets another count).
const paintVisits = 5

// paintReport is what the 10,000-run test logs about the first paint.
type paintReport struct {
	Cold          float64   // the browser's first navigation (one visit), set by the caller
	NewContext    []float64 // cmlab-first-rows of first visits in a new context, nothing warmed
	First, Reload []float64 // cmlab-first-rows of warm-browser first visits and their reloads, ms from navigation start
	FirstByte     []float64 // the warm first visits' document responseStart, ms from navigation start
	Load          string    // /proc/loadavg while measuring
	Requests      string    // the last first visit's requests: [path, initiator, start, end]
	Trace         string    // with CMLAB_PAINT_TRACE=1: where traced first visits' main-thread CPU went
	Before        []string  // the last first visit's requests made before the mark
	LastMark      float64   // the last first visit's mark (ms)
	// Floor: the browser's own floor on this machine, measured the same
	// way: the first contentful paint of warm first visits to a trivial
	// page of 24 text rows and one small style sheet on its own origin
	// (floorPage). What the Lab page takes above it is the page's.
	Floor []float64
	// Sources counts whose rows the marks were the paint of, by kind of
	// visit: the server's (in the HTML) or the page's (runs.js drew them
	// before the browser presented the server's).
	Sources map[string]int
	FCP     []float64 // the warm first visits' first contentful paint (Paint Timing)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// paintJS reads the mark, when the document's first byte came, the
// requests the page made before the mark and the element-timing entries
// of the first rows (an observer's buffered entries: the browser lists
// them nowhere else).
const paintJS = `new Promise((resolve) => {
  const m = performance.getEntriesByName('cmlab-first-rows')[0];
  const mark = m.startTime;
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource').map((e) => [e.name.replace(location.origin, ''), e.initiatorType, Math.round(e.startTime), Math.round(e.responseEnd)]);
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const out = { fcp: fcp ? fcp.startTime : 0, mark, by: (m.detail && m.detail.by) || '', source: (m.detail && m.detail.source) || '', firstByte: nav ? nav.responseStart : 0, res, before: res.filter((r) => r[2] < mark).map((r) => r[0]), element: [] };
  const obs = new PerformanceObserver((list) => {
    obs.disconnect();
    out.element = list.getEntries().filter((e) => e.identifier.startsWith('cmlab-first-rows')).map((e) => e.startTime);
    resolve(JSON.stringify(out));
  });
  obs.observe({ type: 'element', buffered: true });
})`

type paintSample struct {
	Mark      float64         `json:"mark"`
	FCP       float64         `json:"fcp"` // the browser's first contentful paint (Paint Timing)
	By        string          `json:"by"`
	Source    string          `json:"source"` // whose rows: the server's HTML or the page's script
	FirstByte float64         `json:"firstByte"`
	Res       [][]interface{} `json:"res"`
	Before    []string        `json:"before"`
	Element   []float64       `json:"element"` // startTime of the element-timing entries of the first rows
}

// backed says whether an element-timing entry of the first rows has the
// mark's time: the mark is the browser's record of their paint.
func (s paintSample) backed() bool {
	for _, e := range s.Element {
		if math.Abs(e-s.Mark) < 0.01 {
			return s.By == "element-timing"
		}
	}
	return false
}

// firstRowsReady waits for the page's first-rows mark.
func firstRowsReady() chromedp.Action {
	return waitJS(`performance.getEntriesByName('cmlab-first-rows').length === 1`, 30*time.Second)
}

// readPaint evaluates paintJS in the tab of ctx; a mark no element-timing
// entry backs is an error.
func readPaint(ctx context.Context) (paintSample, error) {
	var js string
	var s paintSample
	if err := chromedp.Run(ctx, chromedp.Evaluate(paintJS, &js, awaitPromise)); err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		return s, err
	}
	if !s.backed() {
		return s, fmt.Errorf("the first-rows mark (%.1f ms, by %q) is not the time of an element-timing entry of the first rows %v", s.Mark, s.By, s.Element)
	}
	return s, nil
}

// warmUpOrigin serves a blank page on another origin than the daemon's
// (its own port on 127.0.0.1): the page a warm browser had open before
// the visit, so the visit finds the browser's network stack and a
// renderer running, and nothing of ours in its cache.
func warmUpOrigin(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html><title>another origin</title><p>warm-up")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func visitCount(t *testing.T) int {
	t.Helper()
	s := os.Getenv("CMLAB_PAINT_VISITS")
	if s == "" {
		return paintVisits
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("CMLAB_PAINT_VISITS=%q: want a count of visits", s)
	}
	return n
}

// floorPage is the trivial page of the browser's floor: one style sheet
// and 24 rows of text, no script (ms from navigation start to its first
// contentful paint).
func floorPage(t *testing.T) string {
	t.Helper()
	var rows strings.Builder
	for i := range 24 {
		fmt.Fprintf(&rows, "<tr><td>run %d, a topic of some length</td><td>2026-12-07 10:00</td><td>unrated</td></tr>\n", i)
	}
	page := "<!doctype html><html lang=en><head><meta charset=utf-8><title>floor</title><link rel=stylesheet href=/floor.css></head><body><table>" + rows.String() + "</table></body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/floor.css" {
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
			io.WriteString(w, "body{font-family:system-ui,sans-serif;margin:0} td{padding:8px 12px}")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// measureFloor is the first contentful paint of visits warm first visits
// to floorPage, each in a new browser context after a page of another
// origin, as measurePaint's warm first visits.
func measureFloor(t *testing.T, b *browser, other string, visits int) []float64 {
	t.Helper()
	base := floorPage(t)
	var out []float64
	for i := range visits {
		ctx, cancel := newVisitTab(t, b)
		var fcp float64
		err := chromedp.Run(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(other+"/"), chromedp.Navigate(base+"/"),
			waitJS(`performance.getEntriesByName('first-contentful-paint').length === 1`, 30*time.Second),
			chromedp.Evaluate(`performance.getEntriesByName('first-contentful-paint')[0].startTime`, &fcp))
		cancel()
		if err != nil {
			t.Fatalf("floor visit %d: %v", i+1, err)
		}
		out = append(out, fcp)
	}
	return out
}

// measurePaint opens base/ as a person's first visit, each time in a new
// browser context (nothing cached, no connection open, no storage): once
// with nothing warmed, and once after a page of another origin (a warm
// browser), which it then reloads (the assets cached). It collects the
// page's cmlab-first-rows mark of every load.
func measurePaint(t *testing.T, b *browser, base string) paintReport {
	t.Helper()
	rep := paintReport{Sources: map[string]int{}}
	rep.Load = loadAvg()
	other := warmUpOrigin(t)
	visits := visitCount(t)
	rep.Floor = measureFloor(t, b, other, visits)
	for i := range visits {
		ctx, cancel := newVisitTab(t, b)
		err := chromedp.Run(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(base+"/"), firstRowsReady())
		var c paintSample
		if err == nil {
			c, err = readPaint(ctx)
		}
		cancel()
		if err != nil {
			t.Fatalf("paint visit %d in a new context: %v", i+1, err)
		}
		rep.NewContext = append(rep.NewContext, c.Mark)
		rep.Sources["new context, "+c.Source]++

		ctx, cancel = newVisitTab(t, b)
		var f, r paintSample
		err = chromedp.Run(ctx, chromedp.EmulateViewport(1280, 800),
			chromedp.Navigate(other+"/"), chromedp.Navigate(base+"/"), firstRowsReady())
		if err == nil {
			f, err = readPaint(ctx)
		}
		if err == nil {
			err = chromedp.Run(ctx, chromedp.Reload(), firstRowsReady())
		}
		if err == nil {
			r, err = readPaint(ctx)
		}
		cancel()
		if err != nil {
			t.Fatalf("paint visit %d in a warm browser: %v", i+1, err)
		}
		rep.First = append(rep.First, f.Mark)
		rep.FirstByte = append(rep.FirstByte, f.FirstByte)
		rep.FCP = append(rep.FCP, f.FCP)
		rep.Reload = append(rep.Reload, r.Mark)
		rep.Sources["first visit, "+f.Source]++
		rep.Sources["reload, "+r.Source]++
		rb, _ := json.Marshal(f.Res)
		rep.Requests, rep.Before, rep.LastMark = string(rb), f.Before, f.Mark
	}
	rep.Load += " → " + loadAvg()
	if os.Getenv("CMLAB_PAINT_TRACE") == "1" {
		rep.Trace = tracePaint(t, b, base, other)
	}
	return rep
}

// newVisitTab opens a tab in a new browser context (its own cache,
// connections and storage: a person's first visit in a browser that is
// already running) whose problems b collects. cancel closes it.
func newVisitTab(t *testing.T, b *browser) (context.Context, context.CancelFunc) {
	t.Helper()
	var bc cdp.BrowserContextID
	var tid target.ID
	err := chromedp.Run(b.ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		ex := cdp.WithExecutor(ctx, chromedp.FromContext(ctx).Browser)
		var err error
		if bc, err = target.CreateBrowserContext().Do(ex); err != nil {
			return err
		}
		// Headless Chromium opens a tab of a new browser context only
		// in a window of its own ("no browser is open" otherwise).
		tid, err = target.CreateTarget("about:blank").WithBrowserContextID(bc).WithNewWindow(true).Do(ex)
		return err
	}))
	if err != nil {
		t.Fatalf("a tab in a new browser context: %v", err)
	}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(tid))
	if err := b.watch(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	return ctx, func() {
		cancel()
		chromedp.Run(b.ctx, chromedp.ActionFunc(func(ctx context.Context) error {
			return target.DisposeBrowserContext(bc).Do(cdp.WithExecutor(ctx, chromedp.FromContext(ctx).Browser))
		}))
	}
}

// paintBudgetMs is the first-paint budget the test holds: 200 ms, the
// target, with CMLAB_PAINT_BUDGET_MS=200 (or any other figure); by
// default a generous 1,000 ms scaled by the load per core (never below
// 1): a loaded machine, CI's included, stretches every wall-clock figure
// and a fixed 200 ms would fail on the load, not on the page. The
// default still catches a page that got several times slower.
func paintBudgetMs(t *testing.T, load string) (float64, string) {
	t.Helper()
	if s := os.Getenv("CMLAB_PAINT_BUDGET_MS"); s != "" {
		budget, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("CMLAB_PAINT_BUDGET_MS=%q: %v", s, err)
		}
		return budget, "CMLAB_PAINT_BUDGET_MS"
	}
	perCore := 1.0
	// load is "1 5 15 → 1 5 15" (before and after): the higher 1-minute figure.
	f := strings.Fields(load)
	for _, i := range []int{0, 4} {
		if i >= len(f) {
			continue
		}
		if l, err := strconv.ParseFloat(f[i], 64); err == nil && l/float64(goruntime.NumCPU()) > perCore {
			perCore = l / float64(goruntime.NumCPU())
		}
	}
	return 1000 * perCore, fmt.Sprintf("the default 1,000 ms × %.1f load per core", perCore)
}

// checkPaintBudget fails when the median warm first visit or the median
// reload is over the budget.
func checkPaintBudget(t *testing.T, rep paintReport) {
	t.Helper()
	budget, why := paintBudgetMs(t, rep.Load)
	if m := median(rep.First); m > budget {
		t.Errorf("first useful paint: median %.0f ms of %d first visits (warm browser), over %.0f ms (%s; load average %s)", m, len(rep.First), budget, why, rep.Load)
	}
	if m := median(rep.Reload); m > budget {
		t.Errorf("first useful paint: median %.0f ms of %d reloads, over %.0f ms (%s; load average %s)", m, len(rep.Reload), budget, why, rep.Load)
	}
}

func fmtMs(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(s, " ")
}

// traceEvent is one event of Chrome's trace (the fields used here).
type traceEvent struct {
	Name string          `json:"name"`
	Ph   string          `json:"ph"`
	Ts   float64         `json:"ts"`   // µs
	Tdur float64         `json:"tdur"` // thread (CPU) time, µs
	Pid  int             `json:"pid"`
	Tid  int             `json:"tid"`
	Args json.RawMessage `json:"args"`
}

// tracedVisits is how many warm first visits CMLAB_PAINT_TRACE=1 traces.
const tracedVisits = 3

// rasterPhase is the raster of a tile, on a worker thread of the
// renderer: the first frame is presented only once the tiles in the
// window are rastered, so its CPU is on the way to the mark too.
const rasterPhase = "RasterTask"

// tracePaint traces more warm first visits with Chrome's tracing and says
// where the page's main thread spent its CPU time from navigation start
// to the cmlab-first-rows mark (the median of each phase, and of how many
// times it ran): CPU time, unlike the wall clock, depends less on how
// loaded the machine is. Enabled by CMLAB_PAINT_TRACE=1.
func tracePaint(t *testing.T, b *browser, base, other string) string {
	t.Helper()
	phases := []string{"ThreadControllerImpl::RunTask", "ParseHTML", "ParseAuthorStyleSheet", "v8.compileModule", "v8.evaluateModule", "RunMicrotasks", "FunctionCall", "UpdateLayoutTree", "Layout", "PrePaint", "Paint", "Layerize"}
	per := map[string][]float64{}
	var walls []float64
	for range tracedVisits {
		wall, sum, err := traceVisit(t, b, base, other)
		if err != "" {
			return err
		}
		walls = append(walls, wall)
		for _, p := range append(phases, rasterPhase) {
			per[p] = append(per[p], sum[p])
			per[p+" count"] = append(per[p+" count"], sum[p+" count"])
		}
	}
	var parts []string
	for _, p := range phases {
		name := p
		if p == "ThreadControllerImpl::RunTask" {
			name = "all tasks"
		}
		parts = append(parts, fmt.Sprintf("%s %.1f (%.0f×)", name, median(per[p]), median(per[p+" count"])))
	}
	return fmt.Sprintf("median of %d traced warm first visits: %.0f ms from navigation start to the mark [%s]; main-thread CPU ms: %s (all tasks of each: %s); raster CPU ms on the renderer's workers: %.1f (%.0f tiles) [%s]",
		tracedVisits, median(walls), fmtMs(walls), strings.Join(parts, ", "), fmtMs(per["ThreadControllerImpl::RunTask"]),
		median(per[rasterPhase]), median(per[rasterPhase+" count"]), fmtMs(per[rasterPhase]))
}

// traceVisit traces one warm first visit: the wall time from navigation
// start to the mark (ms) and the main thread's CPU ms by trace event name
// in between, with the renderer's tile rasters under rasterPhase (and
// under "NAME count" how many there were); a non-empty string says why
// there is none.
func traceVisit(t *testing.T, b *browser, base, other string) (float64, map[string]float64, string) {
	t.Helper()
	ctx, cancel := newVisitTab(t, b)
	defer cancel()
	var mu sync.Mutex
	var evs []traceEvent
	done := make(chan struct{})
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *tracing.EventDataCollected:
			mu.Lock()
			for _, v := range e.Value {
				var x traceEvent
				if json.Unmarshal(v, &x) == nil {
					evs = append(evs, x)
				}
			}
			mu.Unlock()
		case *tracing.EventTracingComplete:
			close(done)
		}
	})
	cats := []string{"devtools.timeline", "disabled-by-default-devtools.timeline", "blink.user_timing", "loading", "toplevel", "v8.execute"}
	err := chromedp.Run(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(other+"/"),
		tracing.Start().WithTraceConfig(&tracing.TraceConfig{IncludedCategories: cats}).WithTransferMode(tracing.TransferModeReportEvents),
		chromedp.Navigate(base+"/"), firstRowsReady(),
		tracing.End())
	if err != nil {
		t.Fatalf("trace a first visit: %v", err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the trace did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	main := map[[2]int]bool{}
	var nav, mark float64
	renderer := 0 // the process of the page's main thread, whose workers raster its tiles
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "thread_name" && strings.Contains(string(e.Args), `"CrRendererMain"`) {
			main[[2]int{e.Pid, e.Tid}] = true
		}
		if e.Name == "cmlab-first-rows" {
			mark, renderer = e.Ts, e.Pid
		}
	}
	for _, e := range evs {
		if e.Name == "navigationStart" && e.Ts < mark && e.Ts > nav && strings.Contains(string(e.Args), `"isOutermostMainFrame":true`) {
			nav = e.Ts
		}
	}
	if mark == 0 || nav == 0 {
		return 0, nil, "no navigationStart or mark in the trace"
	}
	// Top-level tasks give the total; the named phases, what it went to.
	sum := map[string]float64{}
	for _, e := range evs {
		if e.Ph == "X" && e.Ts >= nav && e.Ts <= mark && (main[[2]int{e.Pid, e.Tid}] || e.Name == rasterPhase && e.Pid == renderer) {
			sum[e.Name] += e.Tdur / 1000
			sum[e.Name+" count"]++
		}
	}
	return (mark - nav) / 1000, sum, ""
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/cmlab/cmlab/home"
)

// serverViewJS describes the runs view in #app as elements, attributes
// and text (attributes sorted; the elementtiming tags and the thumbnails
// the page adds to cells in view left out): each row, the view without
// its rows, status line and pager, and the rows' text as shown.
const serverViewJS = `JSON.stringify((() => {
  const ser = (n) => {
    if (n.nodeType === Node.TEXT_NODE) return n.data;
    if (n.nodeType !== Node.ELEMENT_NODE || n.localName === 'video') return '';
    const attrs = [...n.attributes].filter((a) => a.name !== 'elementtiming').map((a) => a.name + '=' + JSON.stringify(a.value)).sort();
    let kids = '';
    for (const c of n.childNodes) kids += ser(c);
    return '<' + n.localName + (attrs.length ? ' ' + attrs.join(' ') : '') + '>' + kids + '</' + n.localName + '>';
  };
  const app = document.getElementById('app');
  const trs = [...app.querySelectorAll('#runRows > tr')];
  const copy = app.cloneNode(true);
  copy.querySelector('#runRows').replaceChildren();
  copy.querySelector('#runsStatus').replaceChildren();
  copy.querySelector('nav.pager').replaceChildren();
  return { rows: trs.map(ser), texts: trs.map((tr) => [...tr.cells].map((td) => td.textContent).join('\t')), view: [...copy.childNodes].map(ser).join(''),
    images: document.querySelectorAll('img').length, topics: [...app.querySelectorAll('.run-link')].map((a) => a.textContent),
    timed: app.querySelectorAll('[elementtiming="cmlab-first-rows"]').length };
})())`

type serverView struct {
	Rows   []string `json:"rows"`
	Texts  []string `json:"texts"`
	View   string   `json:"view"`
	Images int      `json:"images"`
	Topics []string `json:"topics"`
	Timed  int      `json:"timed"`
}

// frameRecorder runs before any script of the page and records, at every
// frame, how many run rows #app holds, whether they are the server's
// (main's data-runs) and whether the first one is shown.
const frameRecorder = `window.cmlabFrames = [];
(function tick() {
  const app = document.getElementById('app');
  const rows = document.querySelectorAll('#runRows > tr');
  window.cmlabFrames.push([rows.length, Boolean(app && app.dataset.runs !== undefined), rows.length > 0 && rows[0].offsetParent !== null]);
  requestAnimationFrame(tick);
})();`

// serverRows is the runs view of base/ as the server wrote it, read in a
// tab of its own that runs no script of the page.
func serverRows(t *testing.T, b *browser, base string) serverView {
	t.Helper()
	ctx, cancel := newVisitTab(t, b)
	var js string
	err := chromedp.Run(ctx, emulation.SetScriptExecutionDisabled(true), chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(base+"/"), chromedp.Evaluate(serverViewJS, &js))
	cancel()
	if err != nil {
		t.Fatalf("the page without its script: %v", err)
	}
	b.drain(t, "the page without its script", "request failed: Script ")
	var v serverView
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// labPageServerRows: a page at / holds the first screenful of rows in
// its HTML (labui), the very rows runs.js draws for the same answer; the
// page's script takes them over without a frame of fewer rows; an
// address naming another view never shows them; a hostile topic is text
// there too.
func labPageServerRows(t *testing.T, b *browser, mp4 []byte) {
	dir := t.TempDir()
	root := filepath.Join(dir, "renders")
	h := home.Home{Dir: filepath.Join(dir, "home")}
	seedRuns(t, h, 30, 30)
	srv := startServe(t, "--home", h.Dir, "--allow-root", root)
	var a, x, none struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "run-a", "A topic", mp4)}, &a)
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "run-x", xssTopic, mp4)}, &x)
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "run-n", "", nil)}, &none)
	var fb map[string]any
	srv.postJSON(t, "/api/feedback", map[string]any{"runId": a.RunID, "ratings": map[string]int{"overall": 70}}, &fb)

	// The HTML itself: the hostile topic is escaped text.
	res, err := http.Get(srv.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(html), `<tbody id="runRows"><tr data-run="`+none.RunID+`"`) || strings.Contains(string(html), xssTopic) ||
		!strings.Contains(string(html), `&lt;img src=x onerror=alert(1)&gt;`) {
		t.Fatalf("GET / does not hold the first rows, or holds the hostile topic as markup:\n%s", html)
	}

	// The rows as the server wrote them, in a tab that runs no script of
	// the page: 24 rows (the first screenful), the topic shown literally.
	server := serverRows(t, b, srv.base)
	if len(server.Rows) != 24 || server.Timed != 24 || server.Images != 0 || len(server.Topics) < 2 || server.Topics[0] != "(no topic)" || server.Topics[1] != xssTopic {
		t.Fatalf("the server's rows: %d rows (want 24), %d tagged for their paint, %d <img> (want none), topics %q", len(server.Rows), server.Timed, server.Images, server.Topics)
	}

	// The page with its script, watched frame by frame: once rows are
	// shown, no frame has fewer than the server's; the view it draws is
	// the server's, with the rest of the page's rows.
	var frames [][3]any
	var js string
	b.run(t, "open / with its script",
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(frameRecorder).Do(ctx)
			return err
		}),
		chromedp.Navigate(srv.base+"/"),
		waitJS(`document.getElementById('runsStatus') && document.getElementById('runsStatus').textContent === 'Showing 33 of 33 runs.' && performance.getEntriesByName('cmlab-first-rows').length === 1`, 30*time.Second),
		chromedp.Evaluate(serverViewJS, &js),
		chromedp.Evaluate(`window.cmlabFrames`, &frames))
	var drawn serverView
	if err := json.Unmarshal([]byte(js), &drawn); err != nil {
		t.Fatal(err)
	}
	if len(drawn.Rows) != 33 || drawn.View != server.View {
		t.Errorf("the view the page draws (%d rows) is not the server's:\nserver: %s\npage:   %s", len(drawn.Rows), server.View, drawn.View)
	}
	for i := range server.Rows {
		if i < len(drawn.Rows) && (drawn.Rows[i] != server.Rows[i] || drawn.Texts[i] != server.Texts[i]) {
			t.Errorf("row %d:\nserver: %s %q\npage:   %s %q", i, server.Rows[i], server.Texts[i], drawn.Rows[i], drawn.Texts[i])
		}
	}
	// The rows only ever grow: the server's (as the browser parses them),
	// then the page's, drawn over them in one task.
	last := 0.0
	for i, f := range frames {
		n, _ := f[0].(float64)
		if n < last {
			t.Fatalf("frame %d of the first visit shows %v rows, fewer than the frame before: %v", i, n, frames)
		}
		last = n
	}
	sample, err := readPaint(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var detail string
	b.run(t, "the mark's detail", chromedp.Evaluate(`JSON.stringify(performance.getEntriesByName('cmlab-first-rows')[0].detail)`, &detail))
	t.Logf("first rows painted at %.0f ms (%s; element timing %v), frames (rows, the server's, shown): %v", sample.Mark, detail, sample.Element, frames)
	jsTrue(b, t, "the hostile topic is text after the take-over", `document.querySelectorAll('img').length === 0 && [...document.querySelectorAll('.run-link')].some((a) => a.textContent === `+jsString(xssTopic)+`)`)

	// An address naming another view: the server's rows are never shown.
	b.run(t, "open a review by its address",
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(srv.base+"/#/review/"+a.RunID),
		waitJS(`document.getElementById('runTopic') && document.getElementById('runTopic').textContent === 'A topic'`, 30*time.Second),
		chromedp.Evaluate(`window.cmlabFrames`, &frames))
	for i, f := range frames {
		if f[1] == true && f[2] == true {
			t.Fatalf("frame %d of a review's address showed the server's rows: %v", i, frames)
		}
	}
	b.check(t, "server rows")
	b.checkRequests(t, srv.base)
}

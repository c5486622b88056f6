package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// TestLabPage drives cmlab's own Lab page (package labui, served at / by
// `cmlab serve` without --ui) in headless Chromium, one subtest per user
// task, as a person does it: import (the import error's fix shown inline
// first), rate with the mouse and with the keyboard only, go to the next
// unrated run, see a run and a rating another client made appear without
// a reload, export, compare two runs with synchronised seek and submit, a
// submit whose answer is lost and one made while the daemon restarts
// (each recorded exactly once), a half-filled form that survives a reload,
// one-shot task mode, a hostile topic rendered inert, and a 10,000-run home
// opened one page at a time. It fails on any console error, uncaught
// exception, failed request or JavaScript dialog, and saves screenshots on
// failure (and the docs' screenshots when CMLAB_SCREENSHOT_DIR is set).
func TestLabPage(t *testing.T) {
	chromium := findChromium(t)
	b := newLabBrowser(t, chromium)
	mp4 := makeMP4(t, b)
	b.check(t, "record an mp4")
	t.Run("rate", func(t *testing.T) { labPageRate(t, newLabBrowser(t, chromium), mp4) })
	t.Run("compare", func(t *testing.T) { labPageCompare(t, newLabBrowser(t, chromium), mp4) })
	t.Run("exactly-once", func(t *testing.T) { labPageExactlyOnce(t, newLabBrowser(t, chromium), mp4) })
	t.Run("task", func(t *testing.T) { labPageTask(t, newLabBrowser(t, chromium), mp4) })
	t.Run("live-resume", func(t *testing.T) { labPageLiveResume(t, newLabBrowser(t, chromium), mp4) })
	t.Run("10k-runs", func(t *testing.T) { labPageTenThousand(t, newLabBrowser(t, chromium)) })
	t.Run("quiet-reload", func(t *testing.T) { labPageQuietReload(t, newLabBrowser(t, chromium)) })
	t.Run("server-rows", func(t *testing.T) { labPageServerRows(t, newLabBrowser(t, chromium), mp4) })
}

// xssTopic is the hostile topic of UI.md: it must show as text.
const xssTopic = `<img src=x onerror=alert(1)>`

// newLabBrowser is newBrowser at 1280×800 that also fails on any
// JavaScript dialog (an alert the XSS topic would open).
func newLabBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	b := newBrowser(t, chromium)
	chromedp.ListenTarget(b.ctx, func(ev any) {
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			b.problem("JavaScript dialog opened: %s %q", e.Type, e.Message)
			go chromedp.Run(b.ctx, page.HandleJavaScriptDialog(false))
		case *network.EventRequestWillBeSent:
			b.mu.Lock()
			b.requests = append(b.requests, e.Request.URL)
			b.mu.Unlock()
		}
	})
	if err := chromedp.Run(b.ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	return b
}

// labPageRoute is what the Lab page may ask its daemon for: the page,
// its assets and the Lab routes (never the terminal, steps, recovery,
// /metrics or /mcp, which the Lab token does not open anyway).
var labPageRoute = regexp.MustCompile(`^/(|ui/[0-9a-f]{16}/[a-z]+\.(js|css)|api/(config|health|events\?.*|export|exports/[^/]+|feedback|experiments(\?.*)?|experiments/[^/]+(/submit)?|runs(\?.*)?|runs/import|runs/[^/]+(/video(#.*)?|/feedback|/artifact/[a-z.-]+)?))$`)

// checkRequests fails on any request the page made outside its routes or
// to another origin.
func (b *browser) checkRequests(t *testing.T, base string) {
	t.Helper()
	b.mu.Lock()
	reqs := b.requests
	b.requests = nil
	b.mu.Unlock()
	n := 0
	for _, u := range reqs {
		if strings.HasPrefix(u, "data:") || u == "about:blank" {
			continue
		}
		path, ok := strings.CutPrefix(u, base)
		if !ok || !labPageRoute.MatchString(path) {
			t.Errorf("the page asked for %s: not a Lab route of %s", u, base)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no request recorded")
	}
}

// drain drops the problems matching allowed (what a daemon restart causes:
// refused connections, the old stream's 401) and fails on the rest.
func (b *browser) drain(t *testing.T, step string, allowed ...string) {
	t.Helper()
	b.mu.Lock()
	var keep []string
	for _, p := range b.problems {
		ok := false
		for _, a := range allowed {
			ok = ok || strings.Contains(p, a)
		}
		if !ok {
			keep = append(keep, p)
		}
	}
	b.problems = keep
	b.mu.Unlock()
	b.check(t, step)
}

// docShot saves the viewport as docs/img/NAME when CMLAB_SCREENSHOT_DIR is set.
func (b *browser) docShot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("CMLAB_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	var png []byte
	if err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runDir writes a run folder: video (when mp4 is not nil), script with topic.
func runDir(t *testing.T, root, name, topic string, mp4 []byte) string {
	t.Helper()
	d := filepath.Join(root, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	script, _ := json.Marshal(map[string]any{"meta": map[string]string{"topic": topic}})
	if err := os.WriteFile(filepath.Join(d, "script.json"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	if mp4 != nil {
		if err := os.WriteFile(filepath.Join(d, "video.mp4"), mp4, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

type feedbackItem struct {
	ID           string         `json:"id"`
	RunID        string         `json:"runId"`
	ExperimentID string         `json:"experimentId"`
	Ratings      map[string]int `json:"ratings"`
	Notes        string         `json:"notes"`
	Tags         []string       `json:"tags"`
}

func (s *serveChild) feedback(t *testing.T) []feedbackItem {
	t.Helper()
	var fb struct {
		Items []feedbackItem `json:"items"`
	}
	s.getJSON(t, "/api/feedback?since=0", &fb)
	return fb.Items
}

func feedbackOf(items []feedbackItem, runID string) []feedbackItem {
	var out []feedbackItem
	for _, it := range items {
		if it.RunID == runID {
			out = append(out, it)
		}
	}
	return out
}

// key presses one key as a keyboard does: one keyDown that carries its
// text (so a page that handles the keydown, as a shortcut does, also
// cancels the character), then keyUp. (chromedp.KeyEvent sends the
// character as a separate event that a handled keydown does not cancel:
// a shortcut that focuses a text field would find its own letter typed.)
func key(k string, mods ...input.Modifier) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		r := []rune(k)[0]
		def, ok := kb.Keys[r]
		if !ok {
			return fmt.Errorf("no key %q", k)
		}
		var m input.Modifier
		for _, x := range mods {
			m |= x
		}
		if def.Shift {
			m |= input.ModifierShift
		}
		down := input.DispatchKeyEvent(input.KeyDown).WithKey(def.Key).WithCode(def.Code).
			WithWindowsVirtualKeyCode(def.Windows).WithNativeVirtualKeyCode(def.Native).WithModifiers(m)
		if def.Print && m&input.ModifierCtrl == 0 {
			down = down.WithText(def.Text).WithUnmodifiedText(def.Unmodified)
		}
		if err := down.Do(ctx); err != nil {
			return err
		}
		return input.DispatchKeyEvent(input.KeyUp).WithKey(def.Key).WithCode(def.Code).
			WithWindowsVirtualKeyCode(def.Windows).WithNativeVirtualKeyCode(def.Native).WithModifiers(m).Do(ctx)
	})
}

func jsTrue(b *browser, t *testing.T, step, cond string) {
	t.Helper()
	var ok bool
	b.run(t, step, chromedp.Evaluate(`Boolean(`+cond+`)`, &ok))
	if !ok {
		b.screenshot(t, step)
		t.Fatalf("%s: %s is false", step, cond)
	}
}

func labPageRate(t *testing.T, b *browser, mp4 []byte) {
	dir := t.TempDir()
	root := filepath.Join(dir, "renders")
	a := runDir(t, root, "run-a", "A topic", mp4)
	bb := runDir(t, root, "run-b", "B topic", mp4)
	xss := runDir(t, root, "run-x", xssTopic, mp4)
	outside := runDir(t, filepath.Join(dir, "elsewhere"), "run-o", "outside", nil)
	srv := startServe(t, "--home", filepath.Join(dir, "home"), "--allow-root", root)
	var cfg struct {
		SessionID string `json:"sessionId"`
	}
	srv.getJSON(t, "/api/config", &cfg)

	// The empty home: the allowed roots are shown; an import outside them
	// shows the API's message and fix inline, beside the form.
	var firstPaint float64
	b.run(t, "open the empty home",
		chromedp.Navigate(srv.base+"/"),
		waitJS(`document.getElementById('runsStatus') && document.getElementById('runsStatus').textContent.startsWith('No runs yet')`, 15*time.Second),
		waitJS(`performance.getEntriesByName('cmlab-first-rows').length === 1`, 15*time.Second),
		chromedp.Evaluate(`performance.getEntriesByName('cmlab-first-rows')[0].startTime`, &firstPaint))
	t.Logf("first useful paint, empty home: %.0f ms", firstPaint)
	jsTrue(b, t, "allowed roots shown", `document.getElementById('allowedRoots').textContent.includes(`+jsString(root)+`)`)
	b.run(t, "import outside the roots",
		chromedp.SendKeys("#importPath", outside, chromedp.ByID),
		chromedp.Click(`#importForm button[type="submit"]`, chromedp.ByQuery),
		waitJS(`document.querySelector('#importMsg .error') && document.querySelector('#importMsg .fix').textContent.includes('--allow-root')`, 15*time.Second))
	b.drain(t, "import outside the roots", "request failed: 403 "+srv.base+"/api/runs/import", "status of 403 (Forbidden) ("+srv.base+"/api/runs/import)")

	// Import A through the form (keyboard: i focuses the path, Enter submits).
	var hash string
	b.run(t, "import A",
		chromedp.Evaluate(`document.getElementById('importPath').value = ''; document.activeElement.blur()`, nil),
		key("i"), chromedp.SendKeys("#importPath", a+kb.Enter, chromedp.ByID),
		waitJS(`location.hash.startsWith('#/review/') && document.getElementById('runTopic') && document.getElementById('runTopic').textContent === 'A topic'`, 15*time.Second),
		chromedp.Evaluate(`location.hash`, &hash))
	runA := strings.TrimPrefix(hash, "#/review/")
	var runB, runX struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": bb}, &runB)
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": xss}, &runX)

	// Review A with the mouse: click the Overall slider at three quarters,
	// type notes and tags, click Submit.
	var rect struct{ X, Y, W, H float64 }
	b.run(t, "review A with the mouse",
		waitJS(`(() => { const v = document.getElementById('videoReview'); return v.readyState >= 1 && v.duration > 0; })()`, 20*time.Second),
		chromedp.Evaluate(`(() => { const r = document.getElementById('r-overall').getBoundingClientRect(); return {X: r.x, Y: r.y, W: r.width, H: r.height}; })()`, &rect))
	b.run(t, "click the slider",
		chromedp.MouseClickXY(rect.X+rect.W*0.75, rect.Y+rect.H/2),
		waitJS(`document.getElementById('r-overall-out').textContent !== '–'`, 5*time.Second),
		chromedp.Click("#notes", chromedp.ByID), chromedp.SendKeys("#notes", "clear hook", chromedp.ByID),
		chromedp.Click("#tags", chromedp.ByID), chromedp.SendKeys("#tags", "hook-strong, pacing-ok", chromedp.ByID))
	b.docShot(t, "lab-review.png")
	var shown string
	b.run(t, "submit A",
		chromedp.Evaluate(`document.getElementById('r-overall-out').textContent`, &shown),
		chromedp.Click("#submitBtn", chromedp.ByID),
		waitJS(`document.querySelector('#submitMsg .success') && document.getElementById('earlierList') && document.getElementById('earlierList').textContent.includes('clear hook')`, 15*time.Second))
	b.check(t, "review A with the mouse")
	fa := feedbackOf(srv.feedback(t), runA)
	if len(fa) != 1 || fmt.Sprint(fa[0].Ratings["overall"]) != shown || fa[0].Ratings["overall"] < 65 || fa[0].Ratings["overall"] > 85 || len(fa[0].Ratings) != 1 ||
		fa[0].Notes != "clear hook" || strings.Join(fa[0].Tags, "|") != "hook-strong|pacing-ok" {
		t.Fatalf("A's feedback after the mouse review (slider showed %s): %+v", shown, fa)
	}

	// The keyboard only: u goes to the next unrated run (B or the XSS one,
	// newest first: the XSS one), r focuses Overall, digits set values, j
	// moves on, n writes notes, Ctrl+Enter submits.
	b.run(t, "next unrated with u",
		chromedp.Evaluate(`document.activeElement.blur()`, nil),
		key("u"),
		waitJS(`location.hash === '#/review/`+runX.RunID+`' && document.getElementById('runTopic') && document.getElementById('runTopic').textContent === `+jsString(xssTopic), 15*time.Second))
	// The hostile topic is text: no <img> anywhere, the title shows it literally.
	jsTrue(b, t, "XSS topic inert on the review page", `document.querySelectorAll('img').length === 0 && document.getElementById('reviewTitle').textContent === 'Review: ' + `+jsString(xssTopic))
	b.run(t, "rate X with the keyboard",
		key("r"), key("7"), key("j"), key("4"), key("j"), key("j"), key("0"), key("j"), key("9"), key("x"),
		chromedp.Evaluate(`document.activeElement.blur()`, nil),
		key("n"), chromedp.KeyEvent("<b>bold</b> & keyboard"), key(kb.Enter, input.ModifierCtrl),
		waitJS(`document.querySelector('#submitMsg .success')`, 15*time.Second))
	b.check(t, "rate X with the keyboard")
	fx := feedbackOf(srv.feedback(t), runX.RunID)
	if len(fx) != 1 || fmt.Sprint(fx[0].Ratings) != "map[hook:40 overall:70 script:100]" || fx[0].Notes != "<b>bold</b> & keyboard" {
		t.Fatalf("X's feedback after the keyboard review: %+v", fx)
	}
	b.run(t, "notes shown as text", waitJS(`document.querySelector('#earlierList .fb-notes') && document.querySelector('#earlierList .fb-notes').textContent === '<b>bold</b> & keyboard' && !document.querySelector('#earlierList b')`, 15*time.Second))

	// A half-filled form survives a reload.
	b.run(t, "draft survives a reload",
		key("u"), waitJS(`location.hash === '#/review/`+runB.RunID+`'`, 15*time.Second),
		waitJS(`document.getElementById('r-overall')`, 5*time.Second),
		key("r"), key("3"),
		chromedp.Click("#notes", chromedp.ByID), chromedp.SendKeys("#notes", "half done", chromedp.ByID),
		chromedp.Reload(),
		waitJS(`document.getElementById('r-overall-out') && document.getElementById('r-overall-out').textContent === '30' && document.getElementById('notes').value === 'half done'`, 15*time.Second))
	b.check(t, "draft survives a reload")

	// Live: a rating another client sends shows in the earlier feedback,
	// and a run another client imports shows on the runs page, without a
	// reload of the page.
	b.run(t, "mark the page", chromedp.Evaluate(`window.__sameDocument = 1`, nil))
	var fbOut map[string]any
	srv.postJSON(t, "/api/feedback", map[string]any{"runId": runB.RunID, "ratings": map[string]int{"overall": 55}, "notes": "from another client"}, &fbOut)
	b.run(t, "live feedback",
		waitJS(`document.getElementById('earlierList') && document.getElementById('earlierList').textContent.includes('from another client')`, 15*time.Second))
	b.run(t, "runs page", chromedp.Evaluate(`location.hash = '#/runs'`, nil),
		waitJS(`document.querySelectorAll('#runRows tr').length === 3`, 15*time.Second))
	// The XSS topic in the list: text, no image; in the rows the server
	// writes into the page at / too, read with the page's script off.
	jsTrue(b, t, "XSS topic inert in the list", `document.querySelectorAll('img').length === 0 && [...document.querySelectorAll('.run-link')].some((a) => a.textContent === `+jsString(xssTopic)+`)`)
	if v := serverRows(t, b, srv.base); v.Images != 0 || !slices.Contains(v.Topics, xssTopic) {
		t.Fatalf("XSS topic in the server's rows: %d <img>, topics %q", v.Images, v.Topics)
	}
	late := runDir(t, root, "run-late", "imported by an agent", mp4)
	var lateRun struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": late}, &lateRun)
	b.run(t, "live import",
		waitJS(`document.querySelector('#runRows tr[data-run="`+lateRun.RunID+`"]') && window.__sameDocument === 1`, 15*time.Second))
	b.docShot(t, "lab-runs.png")
	b.check(t, "live updates")

	// Export: the session's file, downloaded from the link the page shows.
	var href string
	b.run(t, "export",
		chromedp.Click("#exportBtn", chromedp.ByID),
		waitJS(`document.getElementById('exportLink')`, 15*time.Second),
		chromedp.Evaluate(`document.getElementById('exportLink').href`, &href))
	res, err := http.Get(href)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var exp struct {
		SessionID string            `json:"sessionId"`
		Feedback  []json.RawMessage `json:"feedback"`
		Runs      []json.RawMessage `json:"runs"`
	}
	if res.StatusCode != 200 || json.Unmarshal(body, &exp) != nil || exp.SessionID != cfg.SessionID || len(exp.Feedback) != 3 || len(exp.Runs) != 4 ||
		!strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment;") {
		t.Fatalf("export download %s: %d %v %.300s", href, res.StatusCode, res.Header, body)
	}
	b.check(t, "export")

	// Phone width: nothing scrolls sideways. On the runs list (whose table
	// may scroll in its own box) a topic keeps a readable column instead of
	// breaking every few letters; the review has the form and the run.
	b.run(t, "runs at phone width",
		chromedp.EmulateViewport(390, 844),
		chromedp.Evaluate(`location.hash = '#/runs'`, nil),
		waitJS(`document.querySelectorAll('#runRows tr').length === 4`, 15*time.Second))
	jsTrue(b, t, "runs usable at phone width", `document.documentElement.scrollWidth <= window.innerWidth && [...document.querySelectorAll('#runRows td.topic')].every((td) => td.getBoundingClientRect().width >= 118)`)
	b.run(t, "review at phone width",
		chromedp.Evaluate(`location.hash = '#/review/`+runA+`'`, nil),
		waitJS(`document.getElementById('r-overall') && document.getElementById('runTopic')`, 15*time.Second))
	jsTrue(b, t, "no sideways scroll at phone width", `document.documentElement.scrollWidth <= window.innerWidth`)
	b.run(t, "back to 1280", chromedp.EmulateViewport(1280, 800))

	// The shortcuts dialog lists the keys.
	b.run(t, "shortcuts", chromedp.Evaluate(`document.activeElement.blur()`, nil), key("?"),
		waitJS(`document.getElementById('keysDialog').open && document.getElementById('keysBody').textContent.includes('Next unrated run')`, 5*time.Second),
		key(kb.Escape))
	b.check(t, "shortcuts")

	checkLabels(t, b, "review")
	b.run(t, "runs page again", chromedp.Evaluate(`location.hash = '#/runs'`, nil), waitJS(`document.querySelectorAll('#runRows tr').length === 4`, 15*time.Second))
	checkLabels(t, b, "runs")
	b.checkRequests(t, srv.base)
}

// checkLabels fails on a control of the page without a label.
func checkLabels(t *testing.T, b *browser, view string) {
	t.Helper()
	var unlabelled []string
	b.run(t, "labels of "+view, chromedp.Evaluate(`[...document.querySelectorAll('input, select, textarea, button')].filter((e) => e.type !== 'hidden' && !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim()).map((e) => e.outerHTML.slice(0, 80))`, &unlabelled))
	if len(unlabelled) > 0 {
		t.Fatalf("controls of the %s view without a label: %q", view, unlabelled)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func labPageCompare(t *testing.T, b *browser, mp4 []byte) {
	dir := t.TempDir()
	root := filepath.Join(dir, "renders")
	srv := startServe(t, "--home", filepath.Join(dir, "home"), "--allow-root", root)
	var ra, rb struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "a", "Baseline take", mp4)}, &ra)
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "b", "Faster hook", mp4)}, &rb)

	// Pick both on the runs page (keyboard: j, x, j, x, c), name the
	// hypothesis and a question, create.
	var hash string
	b.run(t, "create an experiment",
		chromedp.Navigate(srv.base+"/#/runs"),
		waitJS(`document.querySelectorAll('#runRows tr').length === 2`, 15*time.Second),
		key("j"), key("j"), key("x"), key("k"), key("x"),
		waitJS(`!document.getElementById('compareBtn').disabled`, 5*time.Second),
		key("c"),
		waitJS(`document.getElementById('expHypothesis')`, 5*time.Second),
		chromedp.SendKeys("#expHypothesis", "A faster hook keeps viewers", chromedp.ByID),
		chromedp.Click("#addQuestion", chromedp.ByID),
		chromedp.SendKeys("#expQ1", "Is the hook clearer?", chromedp.ByID),
		chromedp.Click("#createExperiment", chromedp.ByID),
		waitJS(`location.hash.startsWith('#/compare/') && document.getElementById('videoA') && document.getElementById('videoB')`, 15*time.Second),
		chromedp.Evaluate(`location.hash`, &hash))
	expID := strings.TrimPrefix(hash, "#/compare/")
	var exp struct {
		Hypothesis    string `json:"hypothesis"`
		BaselineRunID string `json:"baselineRunId"`
		Status        string `json:"status"`
		Questions     []struct {
			ID, Prompt, Type string
		} `json:"questions"`
		Variants []struct {
			VariantID string `json:"variantId"`
			RunID     string `json:"runId"`
		} `json:"variants"`
		Winner  *struct{ VariantID, Reason string } `json:"winner"`
		Answers map[string]string                   `json:"answers"`
	}
	srv.getJSON(t, "/api/experiments/"+expID, &exp)
	// j j x picks the second row (A: oldest), k x the first (B): A is the baseline.
	if exp.Hypothesis != "A faster hook keeps viewers" || exp.BaselineRunID != ra.RunID || len(exp.Variants) != 1 || exp.Variants[0].RunID != rb.RunID ||
		len(exp.Questions) != 1 || exp.Questions[0].Type != "yes_no_unsure" {
		t.Fatalf("experiment created: %+v", exp)
	}

	// Synchronised: play on A plays B, pause pauses both, a seek on A moves B.
	b.run(t, "videos load",
		waitJS(`(() => { const a = document.getElementById('videoA'), v = document.getElementById('videoB'); return a.readyState >= 2 && v.readyState >= 2 && a.duration > 0.5 && v.duration > 0.5; })()`, 20*time.Second))
	b.run(t, "play together",
		chromedp.Evaluate(`document.getElementById('videoA').play()`, nil, awaitPromise),
		waitJS(`!document.getElementById('videoB').paused`, 5*time.Second),
		chromedp.Evaluate(`document.getElementById('videoB').pause()`, nil),
		waitJS(`document.getElementById('videoA').paused && document.getElementById('videoB').paused`, 5*time.Second))
	var diff float64
	b.run(t, "seek together",
		chromedp.Evaluate(`document.getElementById('videoA').currentTime = 0.6`, nil),
		waitJS(`Math.abs(document.getElementById('videoB').currentTime - 0.6) < 0.05 && !document.getElementById('videoB').seeking`, 5*time.Second),
		chromedp.Evaluate(`Math.abs(document.getElementById('videoA').currentTime - document.getElementById('videoB').currentTime)`, &diff))
	if diff > 0.05 {
		t.Fatalf("after a seek on A, B is %.3f s away", diff)
	}
	// The shared position slider moves both.
	b.run(t, "seek with the shared slider",
		chromedp.Evaluate(`(() => { const s = document.getElementById('seekAll'); s.value = '100'; s.dispatchEvent(new Event('input', {bubbles: true})); })()`, nil),
		waitJS(`(() => { const a = document.getElementById('videoA'), v = document.getElementById('videoB'); return Math.abs(a.currentTime - v.currentTime) < 0.05 && a.currentTime < 0.3; })()`, 5*time.Second))
	b.check(t, "synchronised playback")

	// Rate both, answer, pick B, give a reason, submit.
	b.run(t, "rate and submit",
		chromedp.Evaluate(`document.activeElement.blur()`, nil),
		key("r"), key("6"), key("j"), key("5"),
		chromedp.Evaluate(`document.activeElement.blur()`, nil),
		key("b"), key("8"),
		chromedp.Click("#q0-yes", chromedp.ByID),
		chromedp.Click("#winner2", chromedp.ByID),
		chromedp.SendKeys("#reason", "hook lands in the first second", chromedp.ByID))
	b.run(t, "top of the compare page", chromedp.Evaluate(`document.activeElement.blur(); window.scrollTo(0, 0)`, nil))
	b.docShot(t, "lab-compare.png")
	checkLabels(t, b, "compare")
	b.run(t, "submit the comparison",
		chromedp.Click("#submitCompare", chromedp.ByID),
		waitJS(`document.querySelector('#submitMsg .success')`, 15*time.Second))
	b.check(t, "compare + submit")
	srv.getJSON(t, "/api/experiments/"+expID, &exp)
	if exp.Status != "done" || exp.Winner == nil || exp.Winner.VariantID != exp.Variants[0].VariantID || exp.Winner.Reason != "hook lands in the first second" || exp.Answers["q1"] != "yes" {
		t.Fatalf("experiment after submit: %+v", exp)
	}
	fb := srv.feedback(t)
	fa, fbB := feedbackOf(fb, ra.RunID), feedbackOf(fb, rb.RunID)
	if len(fb) != 2 || len(fa) != 1 || len(fbB) != 1 || fmt.Sprint(fa[0].Ratings) != "map[hook:50 overall:60]" || fmt.Sprint(fbB[0].Ratings) != "map[overall:80]" || fa[0].ExperimentID != expID {
		t.Fatalf("per-run feedback: %+v", fb)
	}
	// The experiments list shows it done.
	b.run(t, "experiments list", chromedp.Evaluate(`location.hash = '#/experiments'`, nil),
		waitJS(`document.getElementById('expRows') && document.getElementById('expRows').textContent.includes('✓ done')`, 15*time.Second))
	b.check(t, "experiments list")
	b.checkRequests(t, srv.base)
}

// labPageExactlyOnce: a submit whose answer is lost on the way back (the
// daemon recorded it) and a submit made while the daemon restarts are each
// recorded once; the page says the daemon is unreachable and reconnects by
// itself, and the live stream resumes.
func labPageExactlyOnce(t *testing.T, b *browser, mp4 []byte) {
	dir := t.TempDir()
	root := filepath.Join(dir, "renders")
	h := filepath.Join(dir, "home")
	srv := startServe(t, "--home", h, "--allow-root", root)
	var r struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "a", "Once", mp4)}, &r)
	b.run(t, "open the review",
		chromedp.Navigate(srv.base+"/#/review/"+r.RunID),
		waitJS(`document.getElementById('r-overall') && document.getElementById('runTopic')`, 15*time.Second),
		waitJS(`document.getElementById('live').dataset.state === 'live'`, 15*time.Second))

	// 1. The answer is lost: Chromium lets the request reach the daemon,
	// then drops its response. The page keeps the submit, finds the
	// daemon up, sends it again with the same request id.
	var failed atomic.Int32
	chromedp.ListenTarget(b.ctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			go func() {
				if failed.Add(1) == 1 && e.ResponseStatusCode == 200 {
					chromedp.Run(b.ctx, fetch.FailRequest(e.RequestID, network.ErrorReasonConnectionReset))
					return
				}
				chromedp.Run(b.ctx, fetch.ContinueRequest(e.RequestID))
			}()
		}
	})
	b.run(t, "intercept the feedback answer", fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/feedback", RequestStage: fetch.RequestStageResponse}}))
	b.run(t, "submit, answer lost",
		key("r"), key("6"),
		chromedp.Evaluate(`document.getElementById('submitBtn').click(); document.getElementById('submitBtn').click()`, nil),
		waitJS(`document.querySelector('#submitMsg .success')`, 30*time.Second),
		fetch.Disable())
	b.drain(t, "answer lost", "net::ERR_CONNECTION_RESET")
	if n := failed.Load(); n < 2 {
		t.Fatalf("the feedback POST was intercepted %d times, want the lost one and its retry", n)
	}
	if fb := feedbackOf(srv.feedback(t), r.RunID); len(fb) != 1 || fb[0].Ratings["overall"] != 60 {
		t.Fatalf("after a lost answer: %+v", fb)
	}

	// 2. The daemon stops; the rating is submitted (twice: a double
	// click) while it is away; it comes back on the same port.
	addr := strings.TrimPrefix(srv.base, "http://")
	srv.stop(t)
	b.run(t, "submit while the daemon is down",
		key("r"), key("9"),
		chromedp.Evaluate(`document.getElementById('submitBtn').click(); document.getElementById('submitBtn').click()`, nil),
		waitJS(`!document.getElementById('banner').hidden && document.getElementById('banner').textContent.includes('unreachable')`, 15*time.Second),
		waitJS(`!document.getElementById('outbox').hidden && document.getElementById('outbox').textContent.startsWith('1 submit waiting')`, 5*time.Second))
	b.docShot(t, "lab-unreachable.png")
	srv2 := startServe(t, "--home", h, "--allow-root", root, "--listen", addr)
	b.run(t, "the daemon is back",
		waitJS(`document.querySelector('#submitMsg .success') && document.getElementById('banner').hidden && document.getElementById('outbox').hidden`, 30*time.Second),
		waitJS(`document.getElementById('live').dataset.state === 'live'`, 15*time.Second))
	b.drain(t, "daemon restart", "ERR_CONNECTION_REFUSED", "request failed: 401 "+srv.base+"/api/events", "net::ERR_INCOMPLETE_CHUNKED_ENCODING", "EventSource net::ERR_ABORTED (canceled true)", "/api/events")
	fb := feedbackOf(srv2.feedback(t), r.RunID)
	if len(fb) != 2 || fb[1].Ratings["overall"] != 90 {
		t.Fatalf("after a submit across a restart: %+v", fb)
	}
	// The stream resumed: a rating from another client still shows.
	var out map[string]any
	srv2.postJSON(t, "/api/feedback", map[string]any{"runId": r.RunID, "notes": "after the restart"}, &out)
	b.run(t, "live after the restart", waitJS(`document.getElementById('earlierList').textContent.includes('after the restart')`, 15*time.Second))
	b.check(t, "live after the restart")
}

// labPageTask: serve --task-review RUN --exit-after-submit 1 opens straight
// into the review at /; one keyboard submit and the daemon exits.
func labPageTask(t *testing.T, b *browser, mp4 []byte) {
	dir := t.TempDir()
	root := filepath.Join(dir, "renders")
	h := filepath.Join(dir, "home")
	srv := startServe(t, "--home", h, "--allow-root", root)
	var r struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDir(t, root, "a", "Task run", mp4)}, &r)
	srv.stop(t)
	task := startServe(t, "--home", h, "--allow-root", root, "--task-review", r.RunID, "--exit-after-submit", "1")
	b.run(t, "open the task",
		chromedp.Navigate(task.base+"/"),
		waitJS(`location.hash === '#/review/`+r.RunID+`' && document.getElementById('runTopic') && document.getElementById('runTopic').textContent === 'Task run'`, 15*time.Second),
		waitJS(`document.body.textContent.includes('one-shot task')`, 5*time.Second),
		key("r"), key("8"), key(kb.Enter, input.ModifierCtrl),
		waitJS(`document.querySelector('#submitMsg .success') && document.querySelector('#submitMsg .success').textContent.includes('Server will close shortly')`, 15*time.Second))
	if err := task.wait(t, 30*time.Second); err != nil {
		t.Fatalf("serve --exit-after-submit 1 after the submit: %v\n%s", err, task.stderr)
	}
	b.drain(t, "one-shot task", "ERR_CONNECTION_REFUSED", "/api/events", "ERR_INCOMPLETE_CHUNKED_ENCODING", "EventSource net::ERR_ABORTED (canceled true)")
	fb, err := os.ReadFile(home.Home{Dir: h}.FeedbackFile())
	if err != nil || strings.Count(string(fb), "\n") != 1 || !strings.Contains(string(fb), `"runId":"`+r.RunID+`"`) || !strings.Contains(string(fb), `"ratings":{"overall":80}`) {
		t.Fatalf("feedback after the task: %v %s", err, fb)
	}
}

// seedRuns appends n runs (no files: the list needs none) and perRun
// feedback entries for every tenth run to a fresh home, in batches.
func seedRuns(t *testing.T, h home.Home, n, feedback int) []string {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var ids []string
	var batch []*events.Event
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := eng.Append(ctx, batch...); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	add := func(p events.Payload) {
		ev, err := events.New("lab_seed", p)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, ev)
		if len(batch) == 1000 {
			flush()
		}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("run_seed_%05d", i)
		ids = append(ids, id)
		sync := i % 101
		add(&events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: id, SessionID: "lab_seed",
			CreatedAt: base.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000Z"), Topic: fmt.Sprintf("seeded topic %05d", i),
			ArtifactsDir: "/nonexistent/" + id, ArtifactsDirRealpath: "/nonexistent/" + id,
			AutoMetricsSummary: &events.AutoMetricsSummary{SyncRating: &sync}}})
	}
	for i := range feedback {
		overall := i % 101
		add(&events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_seed_%06d", i),
			CreatedAt: "2026-01-02T00:00:00.000Z", SessionID: "lab_seed", RunID: ids[(i%(n/10))*10], Ratings: &events.Ratings{Overall: &overall}, Notes: "seeded"}})
	}
	flush()
	return ids
}

// labPageTenThousand: a home of 10,000 runs and 100,000 feedback entries
// opens one page of 50 runs; the next page is the next 50; the first
// useful paint is measured (Performance API), logged and held to its
// budget (checkPaintBudget).
func labPageTenThousand(t *testing.T, b *browser) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	start := time.Now()
	ids := seedRuns(t, h, 10_000, 100_000)
	t.Logf("seeded 10,000 runs and 100,000 feedback entries in %v", time.Since(start).Round(time.Millisecond))
	srv := startServe(t, "--home", h.Dir)
	var rows int
	var cold float64
	b.run(t, "open the 10k home",
		chromedp.Navigate(srv.base+"/"),
		waitJS(`document.getElementById('runsStatus') && document.getElementById('runsStatus').textContent === 'Showing 50 of 10000 runs.'`, 30*time.Second),
		chromedp.Evaluate(`document.querySelectorAll('#runRows tr').length`, &rows),
		firstRowsReady(),
		chromedp.Evaluate(`performance.getEntriesByName('cmlab-first-rows')[0].startTime`, &cold))
	// The first paint is of the first screenful: the rows the window
	// shows (they reach its bottom), not the whole page of 50, which come
	// after it; the table takes its columns' widths from its header
	// instead of measuring every cell.
	var first struct {
		Rows   int    `json:"rows"`
		Filled bool   `json:"filled"`
		Layout string `json:"layout"`
	}
	b.run(t, "the first screenful", chromedp.Evaluate(`({...performance.getEntriesByName('cmlab-first-rows')[0].detail, layout: getComputedStyle(document.querySelector('table.runs')).tableLayout})`, &first))
	if first.Rows >= 50 || !first.Filled || first.Layout != "fixed" {
		t.Errorf("first paint: %d rows (want fewer than the page's 50), reaching the window's bottom: %v (want true), table layout %q (want fixed)", first.Rows, first.Filled, first.Layout)
	}
	rep := measurePaint(t, b, srv.base)
	rep.Cold = cold
	t.Logf("first useful paint, 10,000 runs / 100,000 feedback (the page's cmlab-first-rows mark, ms from navigation start; load average %s): warm browser: median %.0f ms of %d first visits [%s] (document's first byte at median %.0f ms), median %.0f ms of %d reloads [%s]; first visit in a new context, nothing warmed: median %.0f ms [%s]; cold browser (its first navigation): %.0f ms; the rows painted (the server's or the page's): %v; first contentful paint of the warm first visits [%s]; the browser's floor (a trivial page's first contentful paint, warm first visits): median %.0f ms [%s]; requests of a warm first visit [path, initiator, start ms, end ms]: %s",
		rep.Load, median(rep.First), len(rep.First), fmtMs(rep.First), median(rep.FirstByte), median(rep.Reload), len(rep.Reload), fmtMs(rep.Reload),
		median(rep.NewContext), fmtMs(rep.NewContext), rep.Cold, rep.Sources, fmtMs(rep.FCP), median(rep.Floor), fmtMs(rep.Floor), rep.Requests)
	if rep.Trace != "" {
		t.Logf("traced: %s", rep.Trace)
	}
	// The first rows come in the HTML (labui renders them): the runs are
	// never asked for before they are painted; what was asked for before
	// then (the style sheet, and whatever else the shell names) is asked
	// for by the shell itself, not by the page's modules.
	api := map[string]int{}
	for _, p := range rep.Before {
		if strings.HasPrefix(p, "/api/") {
			api[p]++
		}
		if strings.HasPrefix(p, "/api/runs") {
			t.Errorf("%s was asked for before the first rows were painted: they are in the HTML", p)
		}
	}
	for p, n := range api {
		if n > 1 {
			t.Errorf("%s asked for %d times before the first rows", p, n)
		}
	}
	// Nor do they wait for the modules of the other views.
	for _, p := range rep.Before {
		for _, m := range []string{"review.js", "compare.js", "experiments.js", "rating.js", "drafts.js"} {
			if strings.HasSuffix(p, "/"+m) {
				t.Errorf("%s was fetched before the first rows", p)
			}
		}
	}
	// Those made before the mark, that is: once the rows are painted, the
	// page's modules ask for the rest (and the live stream's resync for
	// the runs again) at a time that depends on the machine's load.
	var reqs [][]any
	json.Unmarshal([]byte(rep.Requests), &reqs)
	for _, r := range reqs {
		p, _ := r[0].(string)
		start, _ := r[2].(float64)
		if start < rep.LastMark && (r[1] == "fetch" || r[1] == "xmlhttprequest") {
			t.Errorf("%s was asked for by %v at %.0f ms, before the first rows (%.0f ms), not by the shell (its link and script elements)", p, r[1], start, rep.LastMark)
		}
	}
	// Nor does the first frame share the machine with the page's modules
	// and their requests: route.js starts them once the rows are painted,
	// or a second after it ran (it runs once lab.css and route.js are in).
	var shell float64
	for _, r := range reqs {
		p, _ := r[0].(string)
		if end, _ := r[3].(float64); strings.HasSuffix(p, "/lab.css") || strings.HasSuffix(p, "/route.js") {
			shell = math.Max(shell, end)
		}
	}
	for _, r := range reqs {
		p, _ := r[0].(string)
		start, _ := r[2].(float64)
		if strings.HasSuffix(p, "/lab.css") || strings.HasSuffix(p, "/route.js") || start >= rep.LastMark-1 || start >= shell+1000-1 {
			continue
		}
		t.Errorf("%s was asked for at %.0f ms, before the first rows were painted (%.0f ms) and before route.js's second was up (lab.css and route.js in at %.0f ms)", p, start, rep.LastMark, shell)
	}
	checkPaintBudget(t, rep)
	if rows != 50 {
		t.Fatalf("rendered %d rows, want one page of 50", rows)
	}
	jsTrue(b, t, "newest first", `document.querySelector('#runRows tr').dataset.run === '`+ids[9999]+`' && document.querySelector('#runRows tr td:nth-child(6)').textContent === 'unrated'`)
	b.run(t, "next page",
		chromedp.Click("#nextPage", chromedp.ByID),
		waitJS(`document.querySelector('#runRows tr') && document.querySelector('#runRows tr').dataset.run === '`+ids[9949]+`' && document.querySelectorAll('#runRows tr').length === 50`, 15*time.Second))
	b.run(t, "a rated run", chromedp.Evaluate(`location.hash = '#/runs?q=seeded%20topic%2009990'`, nil),
		waitJS(`document.querySelectorAll('#runRows tr').length === 1 && document.querySelector('#runRows tr td:nth-child(6)').textContent === 'rated 100×'`, 15*time.Second))
	b.run(t, "its review", chromedp.Click(".run-link", chromedp.ByQuery),
		waitJS(`document.getElementById('earlierTitle') && document.getElementById('earlierTitle').textContent === 'Earlier feedback (100)' && document.querySelectorAll('#earlierList li').length === 20`, 15*time.Second))
	b.check(t, "10k home")
}

// labPageQuietReload: a reload of the runs page that brings the same
// answer (the live stream's resync once it opens, an event about a run on
// another page) leaves the rows and the pager as they are, so the next-page
// link the user is about to click is still the element under the pointer
// (the page used to rebuild them, and a click then found no node); a
// changed answer redraws every row at once.
func labPageQuietReload(t *testing.T, b *browser) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	ids := seedRuns(t, h, 60, 0)
	srv := startServe(t, "--home", h.Dir)
	var applied int
	b.run(t, "open the home and its live stream",
		chromedp.Navigate(srv.base+"/"),
		waitJS(`document.getElementById('runsStatus') && document.getElementById('runsStatus').textContent === 'Showing 50 of 60 runs.' && document.getElementById('live').dataset.state === 'live'`, 30*time.Second),
		chromedp.Evaluate(`window.cmlabKept = [document.getElementById('nextPage'), document.querySelector('#runRows tr')]; performance.getEntriesByName('cmlab-runs-applied').length`, &applied))
	// A rating of the oldest run (on page 2) reloads page 1 with the same answer.
	var fb struct {
		FeedbackID string `json:"feedbackId"`
	}
	srv.postJSON(t, "/api/feedback", map[string]any{"runId": ids[0], "ratings": map[string]int{"overall": 50}}, &fb)
	b.run(t, "the reload the rating causes",
		waitJS(fmt.Sprintf(`performance.getEntriesByName('cmlab-runs-applied').length > %d`, applied), 15*time.Second))
	jsTrue(b, t, "rows and pager kept", `document.getElementById('nextPage') === window.cmlabKept[0] && document.querySelector('#runRows tr') === window.cmlabKept[1] && window.cmlabKept[1].dataset.run === '`+ids[59]+`' && document.querySelectorAll('#runRows tr').length === 50`)
	// A rating of a run on this page changes the answer: the rows are
	// redrawn all at once (only a view's first rows come in two steps), so
	// the table never shrinks under a reader scrolled down.
	b.run(t, "watch the rows", chromedp.Evaluate(`window.cmlabMinRows = 50; new MutationObserver(() => { window.cmlabMinRows = Math.min(window.cmlabMinRows, document.querySelectorAll('#runRows tr').length); }).observe(document.getElementById('runRows'), { childList: true })`, nil))
	srv.postJSON(t, "/api/feedback", map[string]any{"runId": ids[59], "ratings": map[string]int{"overall": 60}}, &fb)
	b.run(t, "the redraw the rating causes",
		waitJS(`document.querySelector('#runRows tr td:nth-child(6)').textContent === 'rated 1×' && document.querySelectorAll('#runRows tr').length === 50`, 15*time.Second))
	var minRows int
	b.run(t, "rows during the redraw", chromedp.Evaluate(`window.cmlabMinRows`, &minRows))
	if minRows != 50 {
		t.Errorf("the redraw of a page of 50 rows went down to %d rows", minRows)
	}
	b.run(t, "next page",
		chromedp.Click("#nextPage", chromedp.ByID),
		waitJS(`document.querySelector('#runRows tr') && document.querySelector('#runRows tr').dataset.run === '`+ids[9]+`' && document.querySelectorAll('#runRows tr').length === 10 && document.querySelector('#runRows tr:last-child').dataset.run === '`+ids[0]+`' && document.querySelector('#runRows tr:last-child td:nth-child(6)').textContent === 'rated 1×'`, 15*time.Second))
	b.check(t, "quiet reload")
}

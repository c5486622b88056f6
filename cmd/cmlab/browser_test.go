package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/cmlab/cmlab/labapi"
)

// The real-browser test: headless Chromium (the distribution's package,
// never a downloaded browser) driven by chromedp against `cmlab serve --ui
// DIR`, run as a child process. It drives a Lab client through what a
// content-machine user does: import + review + rate, compare + submit, and
// the one-shot task mode (--task-compare EXP --exit-after-submit 1, after
// which the daemon must exit by itself). It fails on any console error,
// uncaught exception or failed request, and saves a screenshot on failure.
//
// The client is our own labapi/testdata/labclient (it makes the calls
// content-machine's assets/lab/app.js makes, in the same order, and keeps
// the element ids their UI tests drive). With CMLAB_CONTENT_MACHINE_DIR
// pointing at a content-machine checkout, the same flows also drive their
// real client, assets/lab of that checkout, unchanged.
//
// Chromium is found as $CMLAB_CHROMIUM, chromium or chromium-browser. When
// it is absent the test fails, saying so, unless CMLAB_SKIP_BROWSER=1 asks
// to skip it (never under CI=true: .ci/run installs the package); a skip
// is also reported on stdout by TestMain.

const (
	envBrowserServeChild = "CMLAB_BROWSER_SERVE_CHILD" // JSON array: the serve arguments
)

// TestBrowserServeChild is `cmlab` itself when re-executed by the browser
// test: it runs the command line in envBrowserServeChild and exits with its
// code.
func TestBrowserServeChild(t *testing.T) {
	spec := os.Getenv(envBrowserServeChild)
	if spec == "" {
		t.Skip("child process of TestLabBrowser")
	}
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(run(&globalOpts{stdout: os.Stdout, stderr: os.Stderr}, args))
}

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CMLAB_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	// go test ./... shows nothing of a passing package but its "ok" line,
	// so a silent skip would hide that the pages were never driven: the
	// test fails, saying why, unless the skip is asked for.
	msg := "BROWSER TEST NOT RUN: no chromium on PATH (apt-get install chromium, or set CMLAB_CHROMIUM); .ci/run installs it"
	if os.Getenv("CMLAB_SKIP_BROWSER") != "1" || os.Getenv("CI") == "true" {
		t.Fatal(msg + "; set CMLAB_SKIP_BROWSER=1 to skip the browser tests on purpose")
	}
	browserSkipped.Store(true)
	fmt.Fprintln(os.Stderr, "\n*** "+msg+" ***")
	t.Skip(msg)
	return ""
}

// serveChild is one `cmlab serve` child process.
type serveChild struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	token  string
	stderr *bytes.Buffer
	done   chan struct{} // closed when the child has exited; err is then its Wait error
	err    error
}

func startServe(t *testing.T, args ...string) *serveChild {
	t.Helper()
	spec, _ := json.Marshal(append([]string{"--json", "serve", "--listen", "127.0.0.1:0", "--quiet"}, args...))
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrowserServeChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envBrowserServeChild+"="+string(spec))
	s := &serveChild{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan labapi.DaemonInfo, 1)
	go func() {
		// The first value is the DaemonInfo (serve --json); the rest is drained.
		br := bufio.NewReader(out)
		var info labapi.DaemonInfo
		if json.NewDecoder(br).Decode(&info) == nil && info.Listen != "" {
			ready <- info
		}
		io.Copy(io.Discard, br)
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case info := <-ready:
		s.base = "http://" + info.Listen
	case <-s.done:
		t.Fatalf("cmlab serve exited before listening: %v\n%s", s.err, s.stderr)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-s.done // stderr is complete once Wait returned
		t.Fatalf("cmlab serve did not start\n%s", s.stderr)
	}
	t.Cleanup(func() { s.stop(t) })
	var cfg struct {
		Token string `json:"token"`
	}
	s.getJSON(t, "/api/config", &cfg)
	s.token = cfg.Token
	return s
}

// stop sends SIGTERM unless the child has exited, and waits for the exit.
func (s *serveChild) stop(t *testing.T) {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait(t, 60*time.Second)
}

// wait waits for the child to exit and reports its error (nil: exit 0).
func (s *serveChild) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(d):
		s.cmd.Process.Kill()
		<-s.done
		return errors.New("did not exit in time")
	}
}

func (s *serveChild) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	res, err := http.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func (s *serveChild) postJSON(t *testing.T, path string, body, v any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CM-LAB-TOKEN", s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", path, res.StatusCode, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
}

// browser is one headless Chromium with a tab whose console errors,
// exceptions and failed requests are collected.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	shots    int
	requests []string // URLs the page asked for (newLabBrowser records them)
}

func newBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"), chromedp.WindowSize(1200, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelC := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
	b := &browser{ctx: ctx}
	if err := b.watch(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// watch collects the console errors, exceptions and failed requests of
// the tab of ctx (b's own, or another one the test opened) into b.
func (b *browser) watch(ctx context.Context) error {
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.problem("console.%s: %s", e.Type, strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			desc := d.Text
			if d.Exception != nil {
				desc += " " + d.Exception.Description
			}
			b.problem("uncaught exception: %s (%s:%d)", desc, d.URL, d.LineNumber)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError && !strings.HasSuffix(e.Entry.URL, "/favicon.ico") {
				b.problem("browser log error: %s (%s)", e.Entry.Text, e.Entry.URL)
			}
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 && !strings.HasSuffix(e.Response.URL, "/favicon.ico") {
				b.problem("request failed: %d %s", e.Response.Status, e.Response.URL)
			}
		case *network.EventLoadingFailed:
			// A media element cancels its own range requests as it seeks
			// and buffers: a cancelled media load is not a failure.
			// Nor is an event stream the page closed (the console's live
			// tail, paused or left).
			if !(e.Canceled && (e.Type == network.ResourceTypeMedia || e.Type == network.ResourceTypeEventSource)) {
				b.problem("request failed: %s %s (canceled %v)", e.Type, e.ErrorText, e.Canceled)
			}
		}
	})
	return chromedp.Run(ctx, network.Enable(), log.Enable(), runtime.Enable())
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// check fails t on every problem collected so far (and screenshots the page).
func (b *browser) check(t *testing.T, step string) {
	t.Helper()
	b.mu.Lock()
	p := b.problems
	b.problems = nil
	b.mu.Unlock()
	for _, s := range p {
		t.Errorf("%s: %s", step, s)
	}
	if len(p) > 0 {
		b.screenshot(t, step)
	}
}

// screenshot saves the page as a PNG under $CMLAB_SCREENSHOT_DIR (else
// the temporary directory) and logs its path.
func (b *browser) screenshot(t *testing.T, step string) {
	t.Helper()
	var png []byte
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 90)); err != nil {
		t.Logf("screenshot of %s failed: %v", step, err)
		return
	}
	dir := os.Getenv("CMLAB_SCREENSHOT_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	b.shots++
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name()+"-"+step)
	p := filepath.Join(dir, fmt.Sprintf("cmlab-browser-%s-%d.png", name, b.shots))
	if err := os.WriteFile(p, png, 0o600); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot of the page at %q: %s", step, p)
}

// run runs actions; on error it screenshots and fails.
func (b *browser) run(t *testing.T, step string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.screenshot(t, step)
		var body string
		chromedp.Run(b.ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ''`, &body))
		b.mu.Lock()
		problems := strings.Join(b.problems, "\n")
		b.mu.Unlock()
		t.Fatalf("%s: %v\npage text: %s\nproblems: %s", step, err, body, problems)
	}
}

// waitJS polls a JavaScript condition until it is true (or the step's
// deadline passes).
func waitJS(cond string, d time.Duration) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		for {
			var ok bool
			if err := chromedp.Evaluate(`Boolean(`+cond+`)`, &ok).Do(ctx); err == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", cond, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// makeMP4 records a one-second MP4 with the browser's MediaRecorder (a
// canvas animation), so the runs hold real videos the <video> elements
// load, as content-machine's UI test renders real MP4s.
func makeMP4(t *testing.T, b *browser) []byte {
	t.Helper()
	var b64 string
	b.run(t, "record an mp4", chromedp.Navigate("about:blank"), chromedp.Evaluate(`(async () => {
  const type = ['video/mp4;codecs=avc1.42E01E', 'video/mp4;codecs=vp9', 'video/mp4'].find((t) => MediaRecorder.isTypeSupported(t));
  if (!type) throw new Error('MediaRecorder cannot write MP4 in this Chromium');
  const c = document.createElement('canvas');
  c.width = 64; c.height = 64;
  const g = c.getContext('2d');
  const rec = new MediaRecorder(c.captureStream(15), { mimeType: type });
  const chunks = [];
  rec.ondataavailable = (e) => chunks.push(e.data);
  const done = new Promise((r) => (rec.onstop = r));
  rec.start();
  for (let i = 0; i < 15; i++) {
    g.fillStyle = 'hsl(' + i * 24 + ',80%,50%)';
    g.fillRect(0, 0, 64, 64);
    await new Promise((r) => setTimeout(r, 66));
  }
  rec.stop();
  await done;
  const buf = new Uint8Array(await new Blob(chunks).arrayBuffer());
  let s = '';
  for (const x of buf) s += String.fromCharCode(x);
  return btoa(s);
})()`, &b64, awaitPromise))
	mp4, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(mp4) < 100 {
		t.Fatalf("recorded mp4: %d bytes, %v", len(mp4), err)
	}
	return mp4
}

func TestLabBrowser(t *testing.T) {
	chromium := findChromium(t)
	clients := []struct{ name, dir string }{{"cmlab-test-client", filepath.Join("..", "..", "labapi", "testdata", "labclient")}}
	if cm := os.Getenv("CMLAB_CONTENT_MACHINE_DIR"); cm != "" {
		clients = append(clients, struct{ name, dir string }{"content-machine-client", filepath.Join(cm, "assets", "lab")})
	}
	b := newBrowser(t, chromium)
	mp4 := makeMP4(t, b)
	b.check(t, "record an mp4")
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			ui, err := filepath.Abs(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(ui, "index.html")); err != nil {
				t.Fatalf("no Lab client at %s: %v", ui, err)
			}
			labBrowserFlows(t, b, ui, mp4, c.name == "content-machine-client")
		})
	}
}

// labBrowserFlows: import + review + rate, compare + submit, one-shot
// compare with --exit-after-submit 1.
//
// With theirs (content-machine's own client) it also runs their UI test's
// good/bad swipe scenario, which only their client has: the submit carries
// the ratings their client infers (20 for the loser, 80 for the winner).
func labBrowserFlows(t *testing.T, b *browser, ui string, mp4 []byte, theirs bool) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	root := filepath.Join(dir, "renders")
	var runDirs []string
	for i, topic := range []string{"A topic", "B topic", "C topic"} {
		d := filepath.Join(root, fmt.Sprintf("run-%02d", i+1))
		script, _ := json.Marshal(map[string]any{"meta": map[string]string{"topic": topic}})
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "video.mp4"), mp4, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "script.json"), script, 0o600); err != nil {
			t.Fatal(err)
		}
		runDirs = append(runDirs, d)
	}
	srv := startServe(t, "--home", h, "--allow-root", root, "--ui", ui)
	b.check(t, "start")

	// Import + review + rate, through the runs page's import form.
	importRun := func(step, path string) string {
		var hash string
		b.run(t, step,
			chromedp.Navigate(srv.base+"/#/runs"),
			// past "Loading…": the config was read and the page rendered
			waitJS(`document.getElementById('sessionLine').textContent.startsWith('session') && document.getElementById('importPath')`, 15*time.Second),
			chromedp.SetValue("#importPath", path, chromedp.ByID),
			chromedp.Evaluate(`document.getElementById('importForm').requestSubmit()`, nil),
			waitJS(`location.hash.startsWith('#/review/') && document.getElementById('videoReview')`, 15*time.Second),
			chromedp.Evaluate(`location.hash`, &hash))
		return strings.TrimPrefix(hash, "#/review/")
	}
	runA := importRun("import A", runDirs[0])
	b.run(t, "review A",
		waitJS(`(() => { const v = document.getElementById('videoReview'); return v.readyState >= 1 && v.duration > 0; })()`, 20*time.Second),
		chromedp.Evaluate(`(() => { const n = document.querySelector('.rating[data-key="overall"] .num'); n.value = '80'; n.dispatchEvent(new Event('input', {bubbles: true})); n.dispatchEvent(new Event('change', {bubbles: true})); })()`, nil),
		chromedp.SetValue("#notes", "clear hook", chromedp.ByID),
		chromedp.Click("#submitBtn", chromedp.ByID),
		waitJS(`document.querySelector('#submitMsg .success')`, 15*time.Second))
	b.check(t, "import + review + rate")
	var fb struct {
		Items []struct {
			RunID   string         `json:"runId"`
			Topic   string         `json:"topic"`
			Ratings map[string]int `json:"ratings"`
			Notes   string         `json:"notes"`
		} `json:"items"`
	}
	srv.getJSON(t, "/api/feedback?since=0", &fb)
	if len(fb.Items) != 1 || fb.Items[0].RunID != runA || fb.Items[0].Topic != "A topic" || fb.Items[0].Ratings["overall"] != 80 || fb.Items[0].Notes != "clear hook" {
		t.Fatalf("feedback after review: %+v", fb.Items)
	}

	// Compare + submit: pick A and B on the runs page, compare, submit.
	runB := importRun("import B", runDirs[1])
	var expHash string
	b.run(t, "compare",
		chromedp.Navigate(srv.base+"/#/runs"),
		waitJS(`document.querySelectorAll('.pick').length === 2`, 15*time.Second),
		chromedp.Click(`.pick[data-run="`+runA+`"]`, chromedp.ByQuery),
		chromedp.Click(`.pick[data-run="`+runB+`"]`, chromedp.ByQuery),
		waitJS(`!document.getElementById('compareBtn').disabled`, 5*time.Second),
		chromedp.Click("#compareBtn", chromedp.ByID),
		waitJS(`location.hash.startsWith('#/compare/') && [...document.querySelectorAll('h1')].some((h) => h.textContent.includes('Compare'))`, 15*time.Second),
		waitJS(`(() => { const a = document.getElementById('videoA'), v = document.getElementById('videoB'); return a && v && a.readyState >= 1 && v.readyState >= 1 && a.duration > 0 && v.duration > 0; })()`, 20*time.Second),
		chromedp.Evaluate(`location.hash`, &expHash),
		chromedp.Click("#submitCompare", chromedp.ByID),
		waitJS(`document.querySelector('#submitMsg .success')`, 15*time.Second))
	b.check(t, "compare + submit")
	expID := strings.SplitN(strings.TrimPrefix(expHash, "#/compare/"), "?", 2)[0]
	var exp struct {
		Status        string `json:"status"`
		BaselineRunID string `json:"baselineRunId"`
		Variants      []struct {
			RunID string `json:"runId"`
		} `json:"variants"`
	}
	srv.getJSON(t, "/api/experiments/"+expID, &exp)
	if exp.Status != "done" || exp.BaselineRunID != runA || len(exp.Variants) != 1 || exp.Variants[0].RunID != runB {
		t.Fatalf("experiment after submit: %+v", exp)
	}
	b.run(t, "experiments page",
		chromedp.Navigate(srv.base+"/#/experiments"),
		waitJS(`[...document.querySelectorAll('h1')].some((h) => h.textContent.includes('Experiments')) && document.body.innerText.includes('A/B Compare') && document.body.innerText.includes('done')`, 15*time.Second))
	b.check(t, "experiments page")

	if theirs {
		var gb struct {
			ExperimentID string `json:"experimentId"`
		}
		srv.postJSON(t, "/api/experiments", map[string]any{"name": "UI E2E good/bad", "baselineRunId": runA,
			"variants": []map[string]string{{"label": "B", "runId": runB}}}, &gb)
		check := func(id string, on bool) string {
			return fmt.Sprintf(`(() => { const e = document.getElementById(%q); if (e.checked !== %v) e.click(); return e.checked === %v; })()`, id, on, on)
		}
		var ok1, ok2, ok3, ok4 bool
		b.run(t, "good/bad swipe",
			chromedp.Navigate(srv.base+"/#/compare/"+gb.ExperimentID+"?goodBadMode=1"),
			waitJS(`(() => { const a = document.getElementById('videoA'), v = document.getElementById('videoB'); return a && v && a.readyState >= 1 && v.readyState >= 1; })()`, 20*time.Second),
			chromedp.Evaluate(check("advancedMode", true), &ok1),
			chromedp.Evaluate(check("quickRateMode", false), &ok2),
			chromedp.Evaluate(check("swipeMode", true), &ok3),
			chromedp.Evaluate(check("goodBadMode", true), &ok4),
			chromedp.Click("#swipeRight", chromedp.ByID),
			chromedp.Click("#submitCompare", chromedp.ByID),
			waitJS(`document.querySelector('#submitMsg .success')`, 15*time.Second))
		if !ok1 || !ok2 || !ok3 || !ok4 {
			t.Fatalf("good/bad swipe: mode toggles %v %v %v %v", ok1, ok2, ok3, ok4)
		}
		b.check(t, "good/bad swipe")
		var all struct {
			Items []struct {
				RunID        string         `json:"runId"`
				ExperimentID string         `json:"experimentId"`
				Ratings      map[string]int `json:"ratings"`
			} `json:"items"`
		}
		srv.getJSON(t, "/api/feedback?since=0", &all)
		got := map[string]int{}
		for _, e := range all.Items {
			if e.ExperimentID == gb.ExperimentID {
				got[e.RunID] = e.Ratings["overall"]
			}
		}
		if len(got) != 2 || got[runA] != 20 || got[runB] != 80 {
			t.Fatalf("good/bad swipe ratings: %v (want %s:20 %s:80)", got, runA, runB)
		}
	}

	// One-shot task mode: an experiment made by an agent (as their UI test
	// makes one), a daemon focused on it that exits after one submission.
	var imp struct {
		RunID string `json:"runId"`
	}
	srv.postJSON(t, "/api/runs/import", map[string]string{"path": runDirs[2]}, &imp)
	var created struct {
		ExperimentID string `json:"experimentId"`
	}
	srv.postJSON(t, "/api/experiments", map[string]any{"name": "UI E2E", "hypothesis": "C should win",
		"baselineRunId": runB, "variants": []map[string]string{{"label": "B", "runId": imp.RunID}}}, &created)
	srv.stop(t)
	if err := srv.wait(t, time.Second); err != nil {
		t.Fatalf("cmlab serve (SIGTERM): %v\n%s", err, srv.stderr)
	}
	task := startServe(t, "--home", h, "--allow-root", root, "--ui", ui, "--task-compare", created.ExperimentID, "--exit-after-submit", "1")
	var cfg struct {
		Task            map[string]string `json:"task"`
		ExitAfterSubmit int               `json:"exitAfterSubmit"`
	}
	task.getJSON(t, "/api/config", &cfg)
	if cfg.Task["type"] != "compare" || cfg.Task["experimentId"] != created.ExperimentID || cfg.ExitAfterSubmit != 1 {
		t.Fatalf("task config: %+v", cfg)
	}
	b.run(t, "one-shot compare",
		chromedp.Navigate(task.base+"/#/compare/"+created.ExperimentID),
		waitJS(`(() => { const a = document.getElementById('videoA'), v = document.getElementById('videoB'); return a && v && a.readyState >= 1 && v.readyState >= 1; })()`, 20*time.Second),
		chromedp.Click("#submitCompare", chromedp.ByID),
		waitJS(`document.querySelector('#submitMsg .success') && document.querySelector('#submitMsg .success').textContent.includes('Server will close shortly')`, 15*time.Second))
	if err := task.wait(t, 30*time.Second); err != nil {
		t.Fatalf("cmlab serve --exit-after-submit 1 after the submission: %v\n%s", err, task.stderr)
	}
	b.check(t, "one-shot compare")
	// The submission is in the home (read it in-process: the daemon is gone).
	code, out, errOut := cli(t, "--home", h, "--json", "experiments", "get", created.ExperimentID)
	if code != 0 || !strings.Contains(out, `"status": "done"`) {
		t.Fatalf("experiment after the one-shot submit: %d %s %s", code, out, errOut)
	}
	// The views these daemons wrote are what a rebuild of their log gives.
	if code, out, errOut := cli(t, "--home", h, "rebuild", "--check"); code != 0 {
		t.Fatalf("rebuild --check: %d %s %s", code, out, errOut)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cmlab/cmlab/home"
)

// The operator console driven in Chromium as an operator uses it, against
// `cmlab serve` children: a daemon is SIGKILLed with a block running, the
// next one closes it; `cmlab run` is SIGKILLed with a step executing.
// Then: log in through `cmlab open`'s link; the overview shows the block
// the crash left open; the log filters by type and follows a trace; the
// live tail shows a new feedback event within 1 s; the interrupted step is
// approved and its state in the log changes. Any console error, uncaught
// exception or failed request fails the test, with a screenshot.

// opCall sends one request with the operator token.
func opCall(t *testing.T, base, tok, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("X-CM-LAB-TOKEN", tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
	}
	return res.StatusCode
}

// consoleLoginURL runs `cmlab open --no-browser` and returns the link it prints.
func consoleLoginURL(t *testing.T, h string) string {
	t.Helper()
	code, out, errOut := cli(t, "--home", h, "open", "--no-browser")
	u := strings.TrimSpace(out)
	if code != 0 || !strings.Contains(u, "/console/login?code=") {
		t.Fatalf("cmlab open: exit %d %q %q", code, out, errOut)
	}
	return u
}

func TestConsoleBrowser(t *testing.T) {
	chromium := findChromium(t)
	dir := t.TempDir()
	h := home.Home{Dir: filepath.Join(dir, "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}

	// A daemon killed with a block running: the next start closes it.
	first := startServe(t, "--home", h.Dir)
	var blk struct {
		BlockID string `json:"block_id"`
	}
	if st := opCall(t, first.base, tok, "POST", "/api/pty/crashconv/exec_block", map[string]string{"cmd": "sleep 600"}, &blk); st != 200 || blk.BlockID == "" {
		t.Fatalf("exec_block: %d %+v", st, blk)
	}
	first.cmd.Process.Kill()
	<-first.done
	srv := startServe(t, "--home", h.Dir)

	// `cmlab run` killed between step b's side effect and its record.
	work := t.TempDir()
	mp := filepath.Join(work, "m.json")
	spec := `{"id":"mk","steps":[
 {"id":"a","argv":["sh","-c","printf a >> a.txt"],"env":["PATH"],"world":["a.txt"],"expect_post":{"a.txt":"a"}},
 {"id":"b","argv":["sh","-c","printf b >> b.txt"],"env":["PATH"],"world":["b.txt"],"expect_post":{"b.txt":"b"}}]}`
	if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRunCrashChild+"=1", envRunCrashHome+"="+h.Dir, envRunCrashFile+"="+mp)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("cmlab run child not killed: %v\n%s", err, out)
	}
	var st struct {
		Mandate struct {
			Steps []struct {
				StepID string `json:"step_id"`
				Status string `json:"status"`
			} `json:"steps"`
		} `json:"mandate"`
	}
	opCall(t, srv.base, tok, "GET", "/api/steps?mandateId=mk", nil, &st)
	if len(st.Mandate.Steps) != 2 || st.Mandate.Steps[1].Status != "executing" {
		t.Fatalf("after the kill: %+v", st)
	}

	var page struct {
		Events []struct {
			Type string          `json:"type"`
			Req  string          `json:"req"`
			Data json.RawMessage `json:"data"`
		} `json:"events"`
	}
	b := newBrowser(t, chromium)
	// Without a session the page says how to log in.
	b.run(t, "no session", chromedp.Navigate(srv.base+"/console/"), waitJS(`!document.getElementById('login').hidden`, 10*time.Second))
	b.mu.Lock()
	b.problems = nil // the 401s of the page's calls without a session are the point
	b.mu.Unlock()

	// Log in through cmlab open's link: redirected to a URL without the code.
	var loc string
	b.run(t, "login", chromedp.Navigate(consoleLoginURL(t, h.Dir)),
		waitJS(`document.querySelector('#healthWord')`, 10*time.Second), chromedp.Evaluate(`location.href`, &loc))
	if loc != srv.base+"/console/#/overview" && loc != srv.base+"/console/" {
		t.Fatalf("after login the page is at %q", loc)
	}
	b.check(t, "login")

	// The overview shows the block the crash left open.
	var crashText string
	b.run(t, "overview", waitJS(`document.querySelector('#crashBlocks')`, 10*time.Second),
		chromedp.Text("#crashBlocks", &crashText, chromedp.ByQuery))
	if !strings.Contains(crashText, blk.BlockID) || !strings.Contains(crashText, "sleep 600") || !strings.Contains(crashText, "crashconv") {
		t.Fatalf("crash-left blocks: %q (want %s)", crashText, blk.BlockID)
	}
	shot(t, b, "overview")
	b.check(t, "overview")

	// The log filters by type; an id leads to its trace.
	b.run(t, "log by type", chromedp.Navigate(srv.base+"/console/#/log"),
		waitJS(`document.querySelectorAll('#logRows tr.ev').length > 0`, 10*time.Second),
		chromedp.SetValue("#f-type", "step.", chromedp.ByID),
		chromedp.Evaluate(`document.getElementById('logFilters').requestSubmit()`, nil),
		waitJS(`location.hash.includes('type=step.') && document.querySelectorAll('#logRows tr.ev').length > 0 && [...document.querySelectorAll('#logRows tr.ev')].every(r => r.dataset.type.startsWith('step.'))`, 10*time.Second))
	var types []string
	b.run(t, "log types", chromedp.Evaluate(`[...document.querySelectorAll('#logRows tr.ev')].map(r => r.dataset.type)`, &types))
	if len(types) != 4 || types[0] != "step.executing" || types[len(types)-1] != "step.planned" {
		t.Fatalf("step events newest first: %v", types)
	}
	shot(t, b, "log")
	b.run(t, "trace", chromedp.Click(`#logRows tr.ev td:nth-child(4) a`, chromedp.ByQuery),
		waitJS(`location.hash.startsWith('#/trace?id=mk') && document.querySelectorAll('#traceList li').length >= 4`, 10*time.Second))
	b.check(t, "log and trace")

	// The live tail shows a new feedback event within 1 s.
	b.run(t, "live tail", chromedp.Navigate(srv.base+"/console/#/log"),
		waitJS(`document.querySelectorAll('#logRows tr.ev').length > 0`, 10*time.Second),
		chromedp.Click("#liveToggle", chromedp.ByID),
		waitJS(`document.getElementById('liveState').textContent === 'live'`, 10*time.Second))
	var fb struct {
		IDs []string `json:"feedbackIds"`
	}
	srv.postJSON(t, "/api/feedback", map[string]any{"notes": "<img src=x onerror=alert(1)> live"}, &fb)
	posted := time.Now()
	b.run(t, "live feedback", waitJS(`[...document.querySelectorAll('#logRows tr.ev')].some(r => r.dataset.type === 'feedback.submitted')`, time.Second))
	if d := time.Since(posted); d > time.Second {
		t.Fatalf("the live tail showed the feedback after %v", d)
	}
	var imgs int
	b.run(t, "no markup", chromedp.Evaluate(`document.querySelectorAll('main img').length`, &imgs))
	if imgs != 0 {
		t.Fatal("a payload's markup was rendered as HTML")
	}
	b.check(t, "live tail")

	// A running block's output appears live; once finished it plays back.
	var live struct {
		BlockID string `json:"block_id"`
	}
	cmdLine := `for i in 1 2 3 4 5 6; do printf '\033[32mline-%s\033[0m <b>\n' $i; sleep 0.4; done`
	if st := opCall(t, srv.base, tok, "POST", "/api/pty/liveconv/exec_block", map[string]string{"cmd": cmdLine}, &live); st != 200 {
		t.Fatalf("exec_block: %d", st)
	}
	b.run(t, "terminal live", chromedp.Navigate(srv.base+"/console/#/terminal?conv=liveconv&block="+live.BlockID),
		waitJS(`document.getElementById('screenState') && document.getElementById('screenState').textContent === 'live' && document.getElementById('screen').textContent.includes('line-2')`, 10*time.Second))
	var green int
	b.run(t, "colours", chromedp.Evaluate(`document.querySelectorAll('#screen .term-fg32').length`, &green))
	if green == 0 {
		t.Fatal("the block's green output has no term-fg32 span")
	}
	shot(t, b, "terminal")
	// Finished, it plays back: the scrubber is the recording's time; at 0
	// the screen shows the command and none of its output's end; Play
	// streams the frames at their times (0.4 s apart) up to line-6.
	b.run(t, "playback", waitJS(`document.getElementById('screenState').textContent === 'finished' && document.getElementById('scrub')`, 20*time.Second),
		chromedp.Evaluate(`(() => { const r = document.getElementById('scrub'); r.value = '0'; r.dispatchEvent(new Event('input')); })()`, nil),
		waitJS(`document.getElementById('screen').textContent.includes('for i in 1 2 3') && !document.getElementById('screen').textContent.includes('line-6')`, 10*time.Second))
	var dur int
	b.run(t, "duration", chromedp.Evaluate(`Number(document.getElementById('scrub').max)`, &dur))
	if dur < 2000 {
		t.Fatalf("a block of six lines 0.4 s apart plays for %d ms", dur)
	}
	b.run(t, "play", chromedp.Click("#play", chromedp.ByID),
		waitJS(`document.getElementById('playState').textContent === 'playing'`, 5*time.Second))
	playStart := time.Now()
	b.run(t, "mid-play", waitJS(`document.getElementById('screen').textContent.includes('line-3') && !document.getElementById('screen').textContent.includes('line-6')`, 10*time.Second),
		waitJS(`document.getElementById('playState').textContent === 'ended' && document.getElementById('screen').textContent.includes('line-6')`, 15*time.Second))
	if d := time.Since(playStart); d < 1500*time.Millisecond {
		t.Fatalf("a %d ms recording played in %v: not at its times", dur, d)
	}
	var bolds int
	b.run(t, "no markup", chromedp.Evaluate(`document.querySelectorAll('#screen b').length`, &bolds))
	if bolds != 0 {
		t.Fatal("terminal output markup was rendered")
	}
	// Typing goes through the terminal API's send, with a request id.
	b.run(t, "type", chromedp.SendKeys("#ptyInput", "echo typed-$((6*7))\n", chromedp.ByID),
		waitJS(`document.getElementById('ptyStatus').textContent === 'sent'`, 10*time.Second))
	opCall(t, srv.base, tok, "GET", "/api/console/log?conv=liveconv&type=pty.input&limit=1", nil, &page)
	var input struct {
		Data []byte `json:"data"`
	}
	if len(page.Events) == 1 {
		json.Unmarshal(page.Events[0].Data, &input)
	}
	if len(page.Events) != 1 || !strings.HasPrefix(page.Events[0].Req, "console-") || string(input.Data) != "echo typed-$((6*7))\n" {
		t.Fatalf("typed input in the log: %+v %q", page.Events, input.Data)
	}
	b.check(t, "terminal")
	// The playback reads the log once, when it opens: the shell's answer
	// to the typed line must be in it by then.
	var typed struct {
		Matched bool `json:"matched"`
	}
	if st := opCall(t, srv.base, tok, "POST", "/api/pty/liveconv/wait_for", map[string]any{"match": "typed-42", "from_cursor": 0, "timeout_ms": 20000}, &typed); st != 200 || !typed.Matched {
		t.Fatalf("the shell's answer to the typed line: status %d, %+v", st, typed)
	}

	// The whole conversation plays back: the block and what was typed after it.
	b.run(t, "conversation", chromedp.Navigate(srv.base+"/console/#/terminal?conv=liveconv"),
		waitJS(`document.getElementById('playInfo') && document.getElementById('playInfo').textContent.startsWith('Whole conversation')`, 20*time.Second),
		waitJS(`document.getElementById('screen').textContent.includes('line-6') && document.getElementById('screen').textContent.includes('typed-42')`, 20*time.Second),
		chromedp.Evaluate(`(() => { const r = document.getElementById('scrub'); r.value = '0'; r.dispatchEvent(new Event('input')); })()`, nil),
		waitJS(`!document.getElementById('screen').textContent.includes('typed-42')`, 10*time.Second),
		chromedp.SetValue("#speed", "8", chromedp.ByID),
		chromedp.Click("#play", chromedp.ByID),
		waitJS(`document.getElementById('playState').textContent === 'ended' && document.getElementById('screen').textContent.includes('typed-42')`, 20*time.Second))
	shot(t, b, "playback")
	b.check(t, "conversation playback")

	// Time travel: the home at the feedback's seq, then now; they differ.
	var fbPage struct {
		Events []struct {
			Seq uint64 `json:"seq"`
		} `json:"events"`
	}
	opCall(t, srv.base, tok, "GET", "/api/console/log?type=feedback.submitted&limit=1", nil, &fbPage)
	if len(fbPage.Events) != 1 {
		t.Fatal("no feedback event")
	}
	pastSeq := fbPage.Events[0].Seq - 1 // just before the feedback
	b.run(t, "travel", chromedp.Navigate(srv.base+"/console/#/travel"),
		waitJS(`document.getElementById('travelSeq')`, 10*time.Second),
		chromedp.SetValue("#travelSeq", fmt.Sprint(pastSeq), chromedp.ByID),
		chromedp.Click("#travelGo", chromedp.ByID),
		waitJS(`document.querySelector('.point[data-seq="`+fmt.Sprint(pastSeq)+`"]')`, 30*time.Second),
		chromedp.Click("#travelNow", chromedp.ByID),
		waitJS(`document.querySelectorAll('.point').length === 2`, 30*time.Second),
		chromedp.Click("#cmpBtn", chromedp.ByID),
		waitJS(`document.querySelector('#compareCard .diff[data-path="feedback/feedback.jsonl"]')`, 10*time.Second))
	var added string
	b.run(t, "travel diff", chromedp.Text(`#compareCard .diff[data-path="feedback/feedback.jsonl"] pre.added`, &added, chromedp.ByQuery))
	if !strings.Contains(added, "live") || !strings.Contains(added, "<img src=x") {
		t.Fatalf("the feedback added since seq %d: %q", pastSeq, added)
	}
	b.run(t, "drift check", chromedp.Click("#checkBtn", chromedp.ByID),
		waitJS(`document.getElementById('checkVerdict') && document.getElementById('checkVerdict').textContent.includes('identical')`, 60*time.Second))
	shot(t, b, "travel")
	b.check(t, "time travel")

	// The interrupted step is approved from the console.
	b.check(t, "before steps")
	b.run(t, "steps", chromedp.Navigate(srv.base+"/console/#/steps"),
		waitJS(`document.querySelector('tr[data-key="mk/b"] button[data-act="approve"]')`, 10*time.Second))
	var verdict string
	b.run(t, "verdict", chromedp.Text(`tr[data-key="mk/b"]`, &verdict, chromedp.ByQuery))
	if !strings.Contains(verdict, "already_done") || !strings.Contains(verdict, "current_state_matches_expected_post") {
		t.Fatalf("row of mk/b: %q", verdict)
	}
	shot(t, b, "steps")
	b.run(t, "approve", chromedp.Click(`tr[data-key="mk/b"] button[data-act="approve"]`, chromedp.ByQuery),
		waitJS(`document.getElementById('confirm').open`, 5*time.Second),
		chromedp.SetValue("#approveNote", "b.txt holds b", chromedp.ByID),
		chromedp.Click("#confirmOk", chromedp.ByID),
		waitJS(`!document.getElementById('confirm').open && document.querySelector('tr[data-key="mk/b"][data-status="completed"]')`, 10*time.Second))
	b.check(t, "approve")
	opCall(t, srv.base, tok, "GET", "/api/console/log?mandate=mk&limit=1", nil, &page)
	if len(page.Events) != 1 || page.Events[0].Type != "step.completed" || !strings.HasPrefix(page.Events[0].Req, "console-") ||
		!strings.Contains(string(page.Events[0].Data), `"operator_approved"`) || !strings.Contains(string(page.Events[0].Data), "b.txt holds b") {
		t.Fatalf("the log after approve: %+v", page)
	}
	fmt.Fprint(io.Discard, page)
}

// shot saves a screenshot of the page into CMLAB_SCREENSHOT_DIR as
// console-NAME.png when it is set (docs/img/ for docs/console.md).
func shot(t *testing.T, b *browser, name string) {
	t.Helper()
	dir := os.Getenv("CMLAB_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	var png []byte
	if err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

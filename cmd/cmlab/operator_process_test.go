package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func httpGet(t *testing.T, url string) (int, string, string) {
	t.Helper()
	return httpGetToken(t, url, "")
}

// httpGetToken is httpGet with the operator token.
func httpGetToken(t *testing.T, url, token string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("X-CM-LAB-TOKEN", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestServeOperatorProcess: serve says where everything is; GET / is the
// Lab page; /metrics is Prometheus's; a busy port suggests port 0; the log
// is in state/daemon.log and 'cmlab logs [-f]' reads it; 'cmlab stop' stops
// the daemon gracefully and waits for it.
func TestServeOperatorProcess(t *testing.T) {
	h := filepath.Join(t.TempDir(), "home") // serve creates it
	p, addr := serveProc(t, "--home", h)
	p.waitStdout(t, "  stop:", 10*time.Second)
	pid := p.cmd.Process.Pid
	wd, _ := os.Getwd()
	want := fmt.Sprintf("  home:   %s\n  token:  %s (clients send it as X-CM-LAB-TOKEN; the CLI reads it itself)\n"+
		"  roots:  %s, %s (imports; each caller is served only files it could read itself)\n"+
		"          %s for callers of unknown uid (--unknown-peer-cwd adds the working directory)\n"+
		"  log:    %s ('cmlab logs -f --home %s')\n  stop:   Ctrl+C, or 'cmlab stop --home %s'\n",
		h, filepath.Join(h, "state", "token"), wd, filepath.Join(wd, "output"), filepath.Join(wd, "output"), filepath.Join(h, "state", "daemon.log"), h, h)
	if out := p.stdout.String(); !regexp.MustCompile(`^cmlab serving http://127\.0\.0\.1:\d+ \(session lab_[0-9a-f-]+, pid `+fmt.Sprint(pid)+`\)\n`).MatchString(out) || !strings.HasSuffix(out, want) {
		t.Fatalf("serve stdout %q\nwant suffix %q", out, want)
	}
	// GET / is the Lab page (package labui); what the old help page said
	// is its About panel (about.js), driven in Chromium by TestLabPage.
	code, ctype, body := httpGet(t, "http://"+addr+"/")
	if code != 200 || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, "<title>cmlab Lab</title>") || !regexp.MustCompile(`<script type="module" src="/ui/[0-9a-f]{16}/app\.js"></script>`).MatchString(body) {
		t.Fatalf("GET / = %d %q %q", code, ctype, body)
	}
	tok, err := os.ReadFile(filepath.Join(h, "state", "token"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, body = httpGetToken(t, "http://"+addr+"/metrics", strings.TrimSpace(string(tok)))
	for _, w := range []string{"# TYPE cmlab_http_requests_total counter\n", "cmlab_pty_shells 0\n", "cmlab_pty_shells_max 64\n", "cmlab_degraded 0\n", "# TYPE cmlab_wal_fsync_seconds histogram\n"} {
		if code != 200 || !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	// The port is taken: say so and how to pick another.
	code, _, errs := cliRun(t, nil, "serve", "--home", filepath.Join(t.TempDir(), "other"), "--listen", addr)
	if code != 1 || !strings.Contains(errs, "address already in use") || !strings.Contains(errs, "  fix: another program listens there") || !strings.Contains(errs, "--listen 127.0.0.1:0") {
		t.Fatalf("busy port = %d %q", code, errs)
	}
	code, out, errs := cliRun(t, nil, "logs", "--home", h, "--format", "json")
	if code != 0 || !strings.Contains(out, `"msg":"serving"`) {
		t.Fatalf("logs = %d %q %q", code, out, errs)
	}
	if code, out, _ := cliRun(t, nil, "logs", "--home", h, "--tail", "1"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("logs --tail 1 = %d %q", code, out)
	}
	f := cliStart(t, nil, "logs", "-f", "--home", h)
	f.waitStdout(t, " INFO  serving listen=", 10*time.Second)
	httpGet(t, "http://"+addr+"/follow-marker") // a 404, logged with its path
	f.waitStdout(t, "follow-marker", 10*time.Second)
	f.cmd.Process.Signal(syscall.SIGINT)
	if code := f.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("logs -f after Ctrl+C = %d %q", code, f.stderr.String())
	}
	code, out, errs = cliRun(t, nil, "stop", "--home", h)
	if !regexp.MustCompile(fmt.Sprintf(`^stopped daemon pid %d \(checkpoint at seq \d+\)\n$`, pid)).MatchString(out) || code != 0 || !strings.Contains(errs, fmt.Sprintf("stopping daemon pid %d", pid)) {
		t.Fatalf("stop = %d %q %q", code, out, errs)
	}
	// stop returned once the daemon had exited (a zombie at most): its
	// parent, this test, reaps it at once.
	if code := p.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("serve exit %d after stop: %q", code, p.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(h, "state", "daemon.json")); !os.IsNotExist(err) {
		t.Fatalf("daemon.json after stop: %v", err)
	}
	if code, _, errs := cliRun(t, nil, "stop", "--home", h); code != 1 || !strings.HasPrefix(errs, "cmlab: no daemon serves the home "+h+"\n") {
		t.Fatalf("second stop = %d %q", code, errs)
	}
}

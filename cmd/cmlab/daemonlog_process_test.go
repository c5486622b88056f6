package main

import (
	"bufio"
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

// TestDaemonLogProcess: the daemon log of 'cmlab serve' as a process.
// stderr is a pipe this test does not read while 1,200 requests are made:
// every one is answered (the request log used to fill the pipe and stop
// the daemon after about 350). stderr then holds the lifecycle as text
// and no request line; state/daemon.log holds every request but no health
// check of the CLI; SIGTERM logs stopping and stopped; --quiet drops the
// request lines only; a new home's first start warns of nothing; 'cmlab
// logs --level warn' and '--format json|text' filter and render.
func TestDaemonLogProcess(t *testing.T) {
	h := filepath.Join(t.TempDir(), "home")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := cliCmd(t, nil, "serve", "--home", h, "--listen", "127.0.0.1:0")
	stdout := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	var addr string
	pollUntil(t, "serve prints its address", func() bool {
		m := servingRe.FindStringSubmatch(stdout.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) int {
		t.Helper()
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const n = 1200
	for i := range n {
		if code := get(fmt.Sprintf("/api/config?i=%d", i)); code != 200 {
			t.Fatalf("request %d = %d", i, code)
		}
	}
	if code := get("/api/health"); code != 200 {
		t.Fatalf("health = %d", code)
	}
	// A CLI command finds its daemon through /api/health: not logged at INFO.
	if code, out, errs := cliRun(t, nil, "status", "--home", h); code != 0 {
		t.Fatalf("status = %d %q %q", code, out, errs)
	}
	logFile := filepath.Join(h, "state", "daemon.log")
	b, _ := os.ReadFile(logFile)
	log := string(b)
	if got := strings.Count(log, `"msg":"request"`); got != n {
		t.Errorf("daemon.log has %d request lines, want %d", got, n)
	}
	if strings.Contains(log, `"path":"/api/health"`) {
		t.Errorf("daemon.log logs health checks at INFO:\n%s", grepLines(log, "/api/health"))
	}
	if strings.Contains(log, `"level":"WARN"`) {
		t.Errorf("a new home's first start warns:\n%s", grepLines(log, `"WARN"`))
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	errb, _ := io.ReadAll(r)
	stderr := string(errb)
	lineRe := `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} `
	for _, want := range []string{
		lineRe + `INFO  starting version=\S+ pid=\d+ home=` + regexp.QuoteMeta(h) + ` listen=127\.0\.0\.1:0 readOnly=false\n`,
		lineRe + `INFO  serving listen=` + regexp.QuoteMeta(addr) + ` `,
		lineRe + `INFO  stopping: drain requests, end terminals, checkpoint signal="SIGTERM \('cmlab stop' or the service manager\)"\n`,
		lineRe + `INFO  stopped pid=\d+\n$`,
	} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, " request method=") || strings.Contains(stderr, "{") {
		t.Errorf("stderr has request or JSON lines:\n%s", stderr)
	}
	b, _ = os.ReadFile(logFile)
	first := string(b)
	for _, want := range []string{`"msg":"starting"`, `"msg":"serving"`, `"msg":"stopping: drain requests, end terminals, checkpoint"`, `"msg":"stopped"`} {
		if !strings.Contains(first, want) {
			t.Errorf("daemon.log lacks %s", want)
		}
	}

	// --quiet: the same lifecycle lines, no request line.
	p, addr := serveProc(t, "--home", h, "--quiet")
	for i := range 5 {
		resp, err := hc.Get(fmt.Sprintf("http://%s/api/config?quiet=%d", addr, i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve --quiet exit %d: %q", code, p.stderr.String())
	}
	b, _ = os.ReadFile(logFile)
	second := strings.TrimPrefix(string(b), first)
	for _, want := range []string{`"msg":"starting"`, `"msg":"serving"`, `"signal":"SIGINT (Ctrl+C)"`, `"msg":"stopped"`} {
		if !strings.Contains(second, want) {
			t.Errorf("--quiet: daemon.log lacks %s:\n%s", want, second)
		}
	}
	if strings.Contains(second, `"msg":"request"`) {
		t.Errorf("--quiet: daemon.log has request lines:\n%s", grepLines(second, "request"))
	}

	// cmlab logs: text by default, JSON as stored, filtered by level.
	code, out, errs := cliRun(t, nil, "logs", "--home", h)
	if code != 0 || !regexp.MustCompile(`(?m)^`+lineRe+`INFO  serving listen=`).MatchString(out) || strings.Contains(out, `"msg"`) {
		t.Fatalf("logs = %d %q %q", code, firstLines(out, 5), errs)
	}
	code, out, _ = cliRun(t, nil, "logs", "--home", h, "--format", "json", "--tail", "1")
	if code != 0 || !strings.HasPrefix(out, `{"time":"`) || !strings.Contains(out, `"msg":"stopped"`) {
		t.Fatalf("logs --format json --tail 1 = %d %q", code, out)
	}
	// A warning of the daemon's: a stale daemon.json is not one, so write
	// one the way a warning reaches the file, through the daemon: serve on a
	// home whose request-id index was deleted (a rebuild is a WARN).
	if err := os.Remove(filepath.Join(h, "state", "reqindex.db")); err != nil {
		t.Fatal(err)
	}
	p, _ = serveProc(t, "--home", h, "--quiet")
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
	code, out, _ = cliRun(t, nil, "logs", "--home", h, "--level", "warn")
	if code != 0 || !regexp.MustCompile(`^`+lineRe+`WARN  request-id index rebuilt from the log `).MatchString(out) || strings.Count(out, "\n") != 1 {
		t.Fatalf("logs --level warn = %d %q", code, out)
	}
	if code, _, errs := cliRun(t, nil, "logs", "--home", h, "--level", "loud"); code != 2 || !strings.Contains(errs, "want debug, info, warn or error") {
		t.Fatalf("logs --level loud = %d %q", code, errs)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "\n")
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "")
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonKilledProcess: a daemon SIGKILLed while a 'cmlab run' step
// and a 'cmlab pty exec' run through it. Both clients say their daemon
// went away and name 'cmlab status' then 'cmlab recover' (not a raw
// "dial tcp …: connection refused"); status says the last daemon did not
// stop cleanly and lists the step left executing.
func TestDaemonKilledProcess(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	serve, _ := serveProc(t, "--home", h, "--quiet")
	pid := serve.cmd.Process.Pid
	if err := os.Mkdir(filepath.Join(dir, "W"), 0o700); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "m.json")
	gate := filepath.Join(dir, "gate")
	spec := fmt.Sprintf(`{"name":"m","steps":[{"id":"s1","argv":["sh","-c","touch %s; sleep 2; echo done >> out"],"cwd":"W","env":["PATH"],"world":["W/out"]}]}`, gate)
	if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	run := cliStart(t, nil, "run", mp, "--home", h)
	pty := cliStart(t, nil, "pty", "exec", "--home", h, "echo started; sleep 30")
	pollUntil(t, "the step to start", func() bool { _, err := os.Stat(gate); return err == nil })
	pty.waitStdout(t, "started\n", 20*time.Second)
	serve.cmd.Process.Signal(syscall.SIGKILL)
	serve.wait(t, 10*time.Second)

	gone := func(what string, p *cliProc) {
		t.Helper()
		code := p.wait(t, 30*time.Second)
		errs := p.stderr.String()
		if code != 1 || !strings.Contains(errs, "cmlab: the daemon at http://127.0.0.1:") || !strings.Contains(errs, " went away") ||
			!strings.Contains(errs, "  fix: see what it left with 'cmlab status --home "+h+"', then 'cmlab recover --home "+h+"'\n") ||
			strings.Contains(errs, "dial tcp") {
			t.Errorf("%s after the daemon died = %d %q", what, code, errs)
		}
	}
	gone("pty exec", pty)
	gone("run", run)

	code, out, errs := cliRun(t, nil, "status", "--home", h)
	want := regexp.MustCompile(`(?m)^daemon:      not running; the last daemon \(pid ` + fmt.Sprint(pid) + `, started \S+\) did not stop cleanly \(killed or crashed\)\n`)
	if code != 0 || !want.MatchString(out) ||
		!strings.Contains(out, "steps:       1 step(s) left executing: m/s1 ('cmlab recover' says what each needs)\n") {
		t.Fatalf("status after kill -9 = %d\n%s%s", code, out, errs)
	}
	code, out, _ = cliRun(t, nil, "status", "--home", h, "--json")
	if code != 0 || !strings.Contains(out, `"executing": [`+"\n"+`    "m/s1"`) || !strings.Contains(out, `"uncleanStop": {`) {
		t.Fatalf("status --json = %d %s", code, out)
	}
}

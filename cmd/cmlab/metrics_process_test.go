package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMetricsProcess: /metrics of 'cmlab serve' carries the process and Go
// collectors, the terminal's bytes and blocks, steps by state, and the
// ages of the checkpoint and of the snapshots the last stop wrote.
func TestMetricsProcess(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	p, _ := serveProc(t, "--home", h, "--quiet")
	mp := filepath.Join(dir, "m.json")
	if err := os.WriteFile(mp, []byte(`{"name":"m","steps":[{"id":"s1","argv":["true"]},{"id":"s2","argv":["true"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := cliRun(t, nil, "run", mp, "--home", h); code != 0 {
		t.Fatalf("run = %d %q %q", code, out, errs)
	}
	if code, out, errs := cliRun(t, nil, "pty", "exec", "--home", h, "printf 0123456789"); code != 0 || out != "0123456789" {
		t.Fatalf("pty exec = %d %q %q", code, out, errs)
	}
	if code, _, errs := cliRun(t, nil, "stop", "--home", h); code != 0 {
		t.Fatalf("stop = %d %q", code, errs)
	}
	p.wait(t, 30*time.Second)
	p, addr := serveProc(t, "--home", h, "--quiet")
	if code, out, errs := cliRun(t, nil, "pty", "exec", "--home", h, "printf abc"); code != 0 || out != "abc" {
		t.Fatalf("pty exec = %d %q %q", code, out, errs)
	}
	tok, err := os.ReadFile(filepath.Join(h, "state", "token"))
	if err != nil {
		t.Fatal(err)
	}
	var body string
	pollUntil(t, "the checkpoint age", func() bool {
		_, _, body = httpGetToken(t, "http://"+addr+"/metrics", strings.TrimSpace(string(tok)))
		return strings.Contains(body, "\ncmlab_checkpoint_age_seconds ")
	})
	for _, want := range []string{
		`(?m)^process_resident_memory_bytes \d`, `(?m)^process_open_fds \d`, `(?m)^go_goroutines \d`,
		// The exec's output since this daemon started: at least its
		// three bytes (the shell's prompt and echo may add more).
		`(?m)^cmlab_pty_blocks_total 1$`, `(?m)^cmlab_pty_output_bytes_total ([3-9]|\d\d+)$`, `(?m)^cmlab_pty_blocks_running 0$`,
		`(?m)^cmlab_steps\{state="completed"\} 2$`, `(?m)^cmlab_steps\{state="executing"\} 0$`,
		`(?m)^cmlab_snapshot_age_seconds\{model="steps"\} \d`,
	} {
		if !regexp.MustCompile(want).MatchString(body) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

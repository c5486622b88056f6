package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRecoverNoiseProcess: on a home whose only mandate finished,
// 'cmlab recover' lists no step (it counts them; --all lists them), and
// a daemon's start logs no start-up decision for it.
func TestRecoverNoiseProcess(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	mp := filepath.Join(dir, "m.json")
	if err := os.WriteFile(mp, []byte(`{"name":"m","steps":[{"id":"s1","argv":["true"]},{"id":"s2","argv":["true"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := cliRun(t, nil, "run", mp, "--home", h, "--init"); code != 0 {
		t.Fatalf("run = %d %q %q", code, out, errs)
	}
	code, out, errs := cliRun(t, nil, "recover", "--home", h)
	if code != 0 || out != "2 completed step(s) not shown (nothing to do for them): --all lists them\nnothing to apply\n" {
		t.Fatalf("recover = %d %q %q", code, out, errs)
	}
	code, out, _ = cliRun(t, nil, "recover", "--home", h, "--all")
	if code != 0 || !strings.HasPrefix(out, "MANDATE") || strings.Count(out, "\nm ") != 2 || strings.Contains(out, "not shown") {
		t.Fatalf("recover --all = %d %q", code, out)
	}
	p, _ := serveProc(t, "--home", h)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
	b, _ := os.ReadFile(filepath.Join(h, "state", "daemon.log"))
	if strings.Contains(string(b), "start-up recovery") || strings.Contains(string(b), `"resume":""`) {
		t.Fatalf("daemon.log logs decisions for a finished mandate:\n%s", grepLines(string(b), "recovery"))
	}
}

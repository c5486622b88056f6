package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeTaskPrintsDeepLink: serve --task-review/--task-compare prints
// the link that opens the page straight into the task, as content-machine's
// lab review/compare print theirs.
func TestServeTaskPrintsDeepLink(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--task-compare", "exp_1", "--exit-after-submit", "1"}, "/#/compare/exp_1 (the daemon stops after 1 submit)\n"},
		{[]string{"--task-review", "run_2"}, "/#/review/run_2\n"},
		{nil, ""},
	} {
		h := filepath.Join(t.TempDir(), "home")
		p, addr := serveProc(t, append([]string{"--home", h}, c.args...)...)
		p.waitStdout(t, "  stop:", 10*time.Second)
		if c.want != "" {
			p.waitStdout(t, c.want, 10*time.Second)
		}
		out := p.stdout.String()
		if c.want == "" {
			if strings.Contains(out, "open:") {
				t.Fatalf("serve without a task printed a link: %q", out)
			}
		} else if !strings.HasSuffix(out, "  open:   http://"+addr+c.want) {
			t.Fatalf("serve %v printed %q, want it to end with the link %q", c.args, out, "http://"+addr+c.want)
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("serve exit %d", code)
		}
	}
}

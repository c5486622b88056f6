package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// TestFeedbackFollowAcrossRestart (issue 25 §5): 'cmlab feedback poll
// --follow' prints entries as they arrive — over the daemon's long poll —
// and keeps its cursor across a real daemon restart (a 'cmlab serve'
// process stopped with SIGTERM, an entry added while none runs, a new
// 'cmlab serve' started): every entry exactly once, in order.
func TestFeedbackFollowAcrossRestart(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	serve := func() *cliProc {
		t.Helper()
		p := cliStart(t, nil, "serve", "--home", h.Dir, "--init", "--listen", "127.0.0.1:0")
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := labapi.ReadDaemonInfo(h); err == nil {
				return p
			}
			if p.exited() || time.Now().After(deadline) {
				t.Fatalf("the daemon did not start: %q", p.stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stop := func(p *cliProc) {
		t.Helper()
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("serve exited %d: %q", code, p.stderr.String())
		}
	}
	add := func(notes string) {
		t.Helper()
		if code, out, errs := cliRun(t, nil, "feedback", "add", "--notes", notes, "--home", h.Dir); code != 0 {
			t.Fatalf("feedback add %s = %d %q %q", notes, code, out, errs)
		}
	}
	d1 := serve()
	add("entry-1")
	f := cliStart(t, nil, "feedback", "poll", "--follow", "--home", h.Dir)
	f.waitStdout(t, `"notes":"entry-1"`, 30*time.Second)
	add("entry-2") // the follower is in its long poll (or about to be)
	f.waitStdout(t, `"notes":"entry-2"`, 30*time.Second)
	stop(d1)
	add("entry-3") // no daemon: the CLI appends to the home itself
	f.waitStdout(t, `"notes":"entry-3"`, 30*time.Second)
	d2 := serve()
	add("entry-4")
	f.waitStdout(t, `"notes":"entry-4"`, 30*time.Second)
	stop(d2)
	if f.exited() {
		t.Fatalf("--follow ended: %q", f.stderr.String())
	}
	var notes []string
	for _, line := range strings.Split(strings.TrimSpace(f.stdout.String()), "\n") {
		var e struct{ Notes string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON entry line: %q", line)
		}
		notes = append(notes, e.Notes)
	}
	if got := strings.Join(notes, ","); got != "entry-1,entry-2,entry-3,entry-4" {
		t.Fatalf("--follow printed %s; stderr %q", got, f.stderr.String())
	}
}

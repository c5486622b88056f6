package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExportProcess: --path - writes the export to stdout; an unknown
// session is an error that lists the home's sessions.
func TestExportProcess(t *testing.T) {
	h := filepath.Join(t.TempDir(), "home")
	if code, _, errs := cliRun(t, nil, "--home", h, "--init", "feedback", "add", "--notes", "exported"); code != 0 {
		t.Fatalf("feedback add = %d %q", code, errs)
	}
	des, err := os.ReadDir(filepath.Join(h, "lab", "sessions"))
	if err != nil || len(des) != 1 {
		t.Fatalf("sessions: %v %v", des, err)
	}
	sid := des[0].Name()
	code, out, errs := cliRun(t, nil, "--home", h, "export", "--session", sid, "--path", "-")
	var exp struct {
		SessionID string           `json:"sessionId"`
		Feedback  []map[string]any `json:"feedback"`
	}
	// No daemon: the export file and its answer were written in-process.
	if code != 0 || errs != "(no daemon: wrote to "+h+" in-process)\n" || json.Unmarshal([]byte(out), &exp) != nil || exp.SessionID != sid || len(exp.Feedback) != 1 {
		t.Fatalf("export --path - = %d %q %q", code, out, errs)
	}
	code, out, errs = cliRun(t, nil, "--home", h, "export", "--session", "lab_nope")
	// (Each command run without a daemon is a Lab session of its own: the
	// export above made a second one.)
	if code != 1 || out != "" || !strings.HasPrefix(errs, "cmlab: NOT_FOUND: no Lab session lab_nope in "+h+"\n  fix: pass one of this home's sessions to --session: lab_") || !strings.Contains(errs, sid) {
		t.Fatalf("export of an unknown session = %d %q %q", code, out, errs)
	}
}

// TestDemoHonoursCmlabHome: demo builds into $CMLAB_HOME; with neither
// --home nor $CMLAB_HOME it refuses (it never writes into ~/.cm).
func TestDemoHonoursCmlabHome(t *testing.T) {
	if code, _, errs := cliRun(t, nil, "demo", "--no-terminal"); code != 2 || !strings.Contains(errs, "needs --home DIR or $CMLAB_HOME") {
		t.Fatalf("demo without a home = %d %q", code, errs)
	}
	d := filepath.Join(t.TempDir(), "demo")
	code, out, errs := cliRun(t, []string{"CMLAB_HOME=" + d}, "demo", "--no-terminal")
	if code != 0 || !strings.Contains(out, "demo home ready: "+d+" ") {
		t.Fatalf("demo with $CMLAB_HOME = %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(d, "wal")); err != nil {
		t.Fatal(err)
	}
}

var servingRe = regexp.MustCompile(`cmlab serving http://([0-9.:]+) `)

// serveProc starts 'cmlab serve' on a free loopback port and waits until
// it prints its address.
func serveProc(t *testing.T, args ...string) (*cliProc, string) {
	t.Helper()
	p := cliStart(t, nil, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := servingRe.FindStringSubmatch(p.stdout.String()); m != nil {
			return p, m[1]
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("serve did not start: %d %q %q", p.code, p.stdout.String(), p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeReplayedHomeReadOnly: a home made by 'cmlab replay --into' is
// served read-only unless --writable.
func TestServeReplayedHomeReadOnly(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if code, _, errs := cliRun(t, nil, "--home", src, "--init", "feedback", "add", "--notes", "one"); code != 0 {
		t.Fatalf("feedback add = %d %q", code, errs)
	}
	into := filepath.Join(t.TempDir(), "replayed")
	code, out, errs := cliRun(t, nil, "--home", src, "replay", "--to", "1", "--into", into)
	if code != 0 || !strings.Contains(out, "serve it (read-only unless --writable): cmlab serve --home "+into+"\n") {
		t.Fatalf("replay = %d %q %q", code, out, errs)
	}
	p, _ := serveProc(t, "--home", into, "--quiet")
	if !strings.Contains(p.stderr.String(), "is a replay of "+src+" up to seq 1: serving it read-only (--writable to allow writes)") {
		t.Fatalf("serve stderr %q", p.stderr.String())
	}
	code, _, errs = cliRun(t, nil, "--home", into, "feedback", "add", "--notes", "two")
	if code != 1 || !strings.Contains(errs, "FORBIDDEN") || !strings.Contains(errs, "read-only") {
		t.Fatalf("write to a replayed home = %d %q", code, errs)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve exit %d: %q", code, p.stderr.String())
	}
	p, _ = serveProc(t, "--home", into, "--writable", "--quiet")
	if code, out, errs := cliRun(t, nil, "--home", into, "feedback", "add", "--notes", "two"); code != 0 || !strings.HasPrefix(out, "fb_") {
		t.Fatalf("write with --writable = %d %q %q", code, out, errs)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

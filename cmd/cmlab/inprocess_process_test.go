package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInProcessWritesProcess: with no daemon a write says it went to the
// home in-process; a home made by 'cmlab replay --into' refuses writes
// (nothing appended) unless --writable; through a daemon there is no
// notice.
func TestInProcessWritesProcess(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	code, out, errs := cliRun(t, nil, "--home", src, "--init", "feedback", "add", "--notes", "one")
	if code != 0 || !strings.HasPrefix(out, "fb_") || !strings.HasSuffix(errs, "(no daemon: wrote to "+src+" in-process)\n") {
		t.Fatalf("feedback add without a daemon = %d %q %q", code, out, errs)
	}
	into := filepath.Join(t.TempDir(), "replayed")
	if code, _, errs := cliRun(t, nil, "--home", src, "replay", "--to", "1", "--into", into); code != 0 {
		t.Fatalf("replay = %d %q", code, errs)
	}
	before := statusLastSeq(t, into)
	code, out, errs = cliRun(t, nil, "--home", into, "feedback", "add", "--notes", "two")
	if code != 1 || out != "" || !strings.Contains(errs, "FORBIDDEN") || !strings.Contains(errs, into+" is a replay of "+src+" up to seq 1: it is read-only") ||
		!strings.Contains(errs, "  fix: write to the live home ("+src+"), or pass --writable") || strings.Contains(errs, "wrote to") {
		t.Fatalf("write into a replay = %d %q %q", code, out, errs)
	}
	if after := statusLastSeq(t, into); after != before {
		t.Fatalf("the refused write appended: last seq %d → %d", before, after)
	}
	code, out, errs = cliRun(t, nil, "--home", into, "--writable", "feedback", "add", "--notes", "two")
	if code != 0 || !strings.HasPrefix(out, "fb_") || errs != "(no daemon: wrote to "+into+" in-process)\n" {
		t.Fatalf("write into a replay with --writable = %d %q %q", code, out, errs)
	}
	p, _ := serveProc(t, "--home", src, "--quiet")
	if code, out, errs := cliRun(t, nil, "--home", src, "feedback", "add", "--notes", "three"); code != 0 || !strings.HasPrefix(out, "fb_") || errs != "" {
		t.Fatalf("feedback add through the daemon = %d %q %q", code, out, errs)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

// statusLastSeq is the last seq of h's log as 'cmlab status --json' says.
func statusLastSeq(t *testing.T, h string) uint64 {
	t.Helper()
	_, out, _ := cliRun(t, nil, "status", "--home", h, "--json")
	var rep struct {
		LastSeq uint64 `json:"lastSeq"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json: %v %q", err, out)
	}
	return rep.LastSeq
}

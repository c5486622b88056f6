package labapi

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
)

// Running out of file descriptors is transient: never a log failure
// (issue 15 §3).

// TestProjectionEMFILEIsNotDegraded: EMFILE opening a view file after the
// feedback was fsynced acknowledges it (200); the log is not degraded and
// health stays ok (views "behind"); a feedback POST that needs the views
// current meanwhile is 503 UNAVAILABLE with Retry-After and appends
// nothing; once descriptors are back the views catch up and hold every
// acknowledged entry.
func TestProjectionEMFILEIsNotDegraded(t *testing.T) {
	var failing atomic.Bool
	open := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if failing.Load() && strings.Contains(name, filepath.Join("sessions", "lab_test")) {
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EMFILE}
		}
		return os.OpenFile(name, flag, perm)
	}
	tl := newTestLabEngine(t, engine.Options{ViewOpenFile: open, CheckpointInterval: 20 * time.Millisecond})
	eng, h := tl.eng, tl.home

	failing.Store(true)
	r := tl.do("POST", "/api/feedback", `{"notes":"durable"}`, "X-CM-LAB-REQUEST-ID", "k-1")
	if r.status != 200 {
		t.Fatalf("feedback fsynced but not projected: %d %s, want 200 (it is durable)", r.status, r.body)
	}
	if eng.Err() != nil {
		t.Fatalf("log failed: %v", eng.Err())
	}
	hm := tl.do("GET", "/api/health", "").json(t)
	if hm["status"] != "ok" || hm["views"] != "behind" || !strings.Contains(hm["viewsCause"].(string), "too many open files") {
		t.Fatalf("health while the views lag: %v", hm)
	}
	seq := tl.lastSeq()
	r = tl.do("POST", "/api/feedback", `{"notes":"refused"}`, "X-CM-LAB-REQUEST-ID", "k-2")
	if r.status != 503 || r.code() != CodeUnavailable || r.header.Get("Retry-After") == "" ||
		!strings.Contains(string(r.body), "too many open files") || strings.Contains(string(r.body), "disk") {
		t.Fatalf("feedback while the views lag: %d %v %s", r.status, r.header, r.body)
	}
	if tl.lastSeq() != seq {
		t.Fatal("a refused request reached the log")
	}
	// The acknowledged request's retry gets its snapshot.
	if r2 := tl.do("POST", "/api/feedback", `{"notes":"durable"}`, "X-CM-LAB-REQUEST-ID", "k-1"); r2.status != 200 {
		t.Fatalf("retry of the acknowledged request: %d %s", r2.status, r2.body)
	}
	failing.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for eng.ViewsErr() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r = tl.do("POST", "/api/feedback", `{"notes":"after"}`, "X-CM-LAB-REQUEST-ID", "k-2"); r.status != 200 {
		t.Fatalf("feedback after descriptors came back: %d %s", r.status, r.body)
	}
	if hm := tl.do("GET", "/api/health", "").json(t); hm["status"] != "ok" || hm["views"] != nil {
		t.Fatalf("health after catch-up: %v", hm)
	}
	lines := tl.feedbackLines()
	if len(lines) != 2 || !strings.Contains(lines[0], `"durable"`) || !strings.Contains(lines[1], `"after"`) {
		t.Fatalf("feedback.jsonl: %q", lines)
	}
	ev, err := os.ReadFile(filepath.Join(h.Dir, "lab", "sessions", "lab_test", "events.jsonl"))
	if err != nil || strings.Count(string(ev), "feedback.submitted") != 2 {
		t.Fatalf("session events after catch-up: %v %s", err, ev)
	}
}

// TestDegradedFixNamesTheCause: the DEGRADED answer's fix follows the
// cause: disk space only for ENOSPC, descriptors for EMFILE, the disk for
// EIO.
func TestDegradedFixNamesTheCause(t *testing.T) {
	for _, tc := range []struct {
		cause       error
		want, never string
	}{
		{&os.PathError{Op: "write", Path: "wal/x", Err: syscall.ENOSPC}, "Free disk space", "file descriptors"},
		{&os.PathError{Op: "open", Path: "wal/x", Err: syscall.EMFILE}, "file descriptors", "disk space"},
		{&os.PathError{Op: "fsync", Path: "wal/x", Err: syscall.EIO}, "check the disk", "disk space"},
	} {
		ae := degradedError(tc.cause)
		if ae.Status() != 503 || ae.Code != CodeDegraded || !strings.Contains(ae.Fix(), tc.want) || strings.Contains(ae.Fix(), tc.never) {
			t.Errorf("%v: %d %s fix %q", tc.cause, ae.Status(), ae.Code, ae.Fix())
		}
	}
}

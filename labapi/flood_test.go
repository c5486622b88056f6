package labapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
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

// TestIdleConnectionFlood: a daemon whose descriptor limit is 256 (a
// re-executed child) is flooded with 400 idle connections; while they are
// held, and after, feedback POSTs succeed (200), health stays ok, and the
// log is never degraded.
func TestIdleConnectionFlood(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	cmd, info := startDaemon(t, h, envDaemonNofile+"=256")
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	tokB, err := os.ReadFile(info.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(tokB))
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	post := func(what string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+info.Listen+"/api/feedback", strings.NewReader(`{"notes":"`+what+`"}`))
		req.Header.Set("X-CM-LAB-TOKEN", tok)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("feedback %s: %v", what, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("feedback %s: %d %s", what, res.StatusCode, b)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("feedback %s took %v", what, d)
		}
	}
	health := func(when string) {
		t.Helper()
		res, err := client.Get("http://" + info.Listen + "/api/health")
		if err != nil {
			t.Fatalf("health %s: %v", when, err)
		}
		var hm map[string]any
		json.NewDecoder(res.Body).Decode(&hm)
		res.Body.Close()
		if hm["status"] != "ok" {
			t.Fatalf("health %s: %v", when, hm)
		}
	}
	post("before")
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 400 {
		c, err := net.DialTimeout("tcp", info.Listen, 5*time.Second)
		if err != nil {
			t.Fatalf("flood connection %d: %v", len(flood), err)
		}
		flood = append(flood, c)
	}
	for i := range 5 {
		post(fmt.Sprintf("during-%d", i))
		health("during the flood")
	}
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	post("after")
	health("after the flood")
	lines, err := os.ReadFile(h.FeedbackFile())
	if err != nil || strings.Count(string(lines), "\n") != 7 {
		t.Fatalf("feedback.jsonl after the flood: %v\n%s", err, lines)
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

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// buildVerifyHome makes a home of n mixed Lab events in segments of
// segSize bytes and closes it.
func buildVerifyHome(t *testing.T, n, segSize int) home.Home {
	t.Helper()
	h := home.Home{Dir: filepath.Join(privateTempDir(t), "home")}
	e, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: segSize, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var batch []*events.Event
	for ev := range projections.Workload(projections.WorkloadMixedLab, 3, n) {
		if batch = append(batch, ev); len(batch) == 64 {
			if _, err := e.Append(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	if _, err := e.Append(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// An open as the daemon's records the sealed segments it read in
	// wal/VERIFIED: the next start does not read them again.
	e, err = engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: segSize, NoSync: true, VerifyAfterOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// runVerifyDaemon serves h until the returned stop is called, logging to
// the returned buffer. A daemon that does not start is fatal.
func runVerifyDaemon(t *testing.T, h home.Home, segSize int) (labapi.DaemonInfo, *syncBuffer, func()) {
	t.Helper()
	info, logBuf, stop, err := startVerifyDaemon(t, h, segSize, nil)
	if err != nil {
		t.Fatalf("daemon: %v", err)
	}
	return info, logBuf, stop
}

// startVerifyDaemon is runVerifyDaemon returning the error of a daemon
// that ended before it was ready.
// onReady, when set, runs in the Ready callback: after the start, before
// the daemon starts its verification.
func startVerifyDaemon(t *testing.T, h home.Home, segSize int, onReady func()) (labapi.DaemonInfo, *syncBuffer, func(), error) {
	t.Helper()
	logBuf := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Home: h, Listen: "127.0.0.1:0", Logger: logger, SegmentSize: segSize, Ready: func(i labapi.DaemonInfo) {
			if onReady != nil {
				onReady()
			}
			ready <- i
		}})
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		cancel()
		return info, logBuf, func() {}, err
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("daemon not ready")
	}
	stopped := false
	return info, logBuf, func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("daemon did not stop")
		}
	}, nil
}

// waitLog polls the daemon's log for msg.
func waitLog(t *testing.T, logBuf *syncBuffer, msg string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(logBuf.String(), "\n") {
			if strings.Contains(line, msg) {
				return line
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the daemon's log has no %q within 30 s:\n%s", msg, logBuf.String())
	return ""
}

// TestDaemonRegeneratesViewDamagedBeforeTail: the daemon starts without
// reading the views whole; a byte really flipped near the start of
// runs.jsonl is found by the verification it runs once serving, which
// regenerates the views and logs it; runs.jsonl holds the log's bytes.
func TestDaemonRegeneratesViewDamagedBeforeTail(t *testing.T) {
	h := buildVerifyHome(t, 800, 0)
	path := filepath.Join(h.Dir, filepath.FromSlash(projections.RunsView))
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 4*projections.TailBytes {
		t.Fatalf("runs.jsonl: %d bytes (%v)", len(b), err)
	}
	orig := bytes.Clone(b)
	b[10] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, logBuf, stop := runVerifyDaemon(t, h, 0)
	line := waitLog(t, logBuf, "views damaged before their checkpoint were regenerated from the log")
	if !strings.Contains(line, projections.RunsView) {
		t.Fatalf("log line does not name runs.jsonl: %s", line)
	}
	stop()
	if got, _ := os.ReadFile(path); !bytes.HasPrefix(got, orig) {
		t.Fatal("runs.jsonl not regenerated")
	}
}

// TestDaemonFailsLogDamagedBeforeTail: a byte really flipped (its mtime
// kept, as bit rot) inside an entry of the log's first segment, which
// wal/VERIFIED lets wal.Open skip, is never let through. Before the start,
// a start-up read model that replays the log from seq 1 meets it and
// refuses to start (as before); without one, or when the byte flips after
// those reads (in the Ready callback, before the daemon starts its
// verification), the verification after the start finds it and fails the
// log: health is degraded with the salvage fix, a write is answered
// DEGRADED. Either way nothing is appended.
func TestDaemonFailsLogDamagedBeforeTail(t *testing.T) {
	for _, when := range []string{"before the start", "after the start-up reads"} {
		t.Run(when, func(t *testing.T) { testDaemonFailsLogDamaged(t, when != "before the start") })
	}
}

func testDaemonFailsLogDamaged(t *testing.T, afterStart bool) {
	const seg = 64 << 10
	h := buildVerifyHome(t, 800, seg)
	if st, err := wal.Stat(h.WALDir()); err != nil || len(st.Segments) < 3 {
		t.Fatalf("%d segments (%v)", len(st.Segments), err)
	}
	segs, _ := filepath.Glob(filepath.Join(h.WALDir(), "0*"))
	first := segs[0]
	flip := func() { // bit rot: the mtime stays
		fi, err := os.Stat(first)
		if err != nil {
			t.Error(err)
			return
		}
		b, err := os.ReadFile(first)
		if err != nil {
			t.Error(err)
			return
		}
		b[len(b)/2] ^= 0x01
		if err := os.WriteFile(first, b, 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Chtimes(first, fi.ModTime(), fi.ModTime()); err != nil {
			t.Error(err)
		}
	}
	var onReady func()
	if afterStart {
		onReady = flip // the daemon has read the log; its verification has not started
	} else {
		flip()
	}
	before, err := wal.Stat(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	info, logBuf, stop, err := startVerifyDaemon(t, h, seg, onReady)
	if err != nil {
		// Damage at rest before the start: a read model replaying the log
		// from seq 1 meets it and refuses to start, as before.
		if afterStart || !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("daemon: %v", err)
		}
		t.Logf("refused at start: %v", err)
		if st, err := wal.Stat(h.WALDir()); err != nil || st.Last != before.Last {
			t.Fatalf("the log ends at %d (%v), want %d", st.Last, err, before.Last)
		}
		return
	}
	defer stop()
	waitLog(t, logBuf, "the log is damaged before its last segment")
	res, err := http.Get("http://" + info.Listen + "/api/health")
	if err != nil {
		t.Fatal(err)
	}
	var health labapi.Health
	err = json.NewDecoder(res.Body).Decode(&health)
	res.Body.Close()
	if err != nil || health.Status != "degraded" || !strings.Contains(health.Cause, filepath.Base(first)) || !strings.Contains(health.Fix, "cmlab recover --salvage") {
		t.Fatalf("health %+v (%v), want degraded naming %s", health, err, filepath.Base(first))
	}
	last := health.WalIndex
	cfg, err := http.Get("http://" + info.Listen + "/api/config")
	if err != nil {
		t.Fatal(err)
	}
	var config struct{ Token string }
	json.NewDecoder(cfg.Body).Decode(&config)
	cfg.Body.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://"+info.Listen+"/api/feedback", strings.NewReader(`{"runId":"run_1","ratings":{"overall":50}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CM-LAB-TOKEN", config.Token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "DEGRADED") {
		t.Fatalf("POST /api/feedback on a damaged log: %d %s", res.StatusCode, body)
	}
	stop()
	if st, err := wal.Stat(h.WALDir()); err != nil || st.Last != last {
		t.Fatalf("the log ends at %d (%v), want %d: something was appended", st.Last, err, last)
	}
}

package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
)

// runDaemonOnce runs the daemon over h until it is ready, then stops it;
// its log goes to logger (nil: discarded).
func runDaemonOnce(t *testing.T, h home.Home, logger *slog.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Home: h, Listen: "127.0.0.1:0", Logger: logger, Ready: func(i labapi.DaemonInfo) { ready <- i }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("daemon: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not stop")
	}
}

// TestDamagedTerminalSnapshotIsLogged (issue 27 item 11): the daemon once
// gave the terminal manager no logger, so a damaged
// state/snapshots/pty.msgpack was rebuilt from the log without a word.
// The daemon's log must name the file and why it was ignored.
func TestDamagedTerminalSnapshotIsLogged(t *testing.T) {
	h := home.Home{Dir: filepath.Join(privateTempDir(t), "home")}
	runDaemonOnce(t, h, nil)
	snap := pty.SnapshotFile(h)
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatalf("the daemon wrote no terminal snapshot: %v", err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(snap, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var logBuf syncBuffer
	runDaemonOnce(t, h, slog.New(slog.NewTextHandler(&logBuf, nil)))
	log := logBuf.String()
	if !strings.Contains(log, "terminal snapshot ignored") || !strings.Contains(log, "state/snapshots/pty.msgpack") {
		t.Fatalf("the daemon's log does not name the damaged terminal snapshot:\n%s", log)
	}
}

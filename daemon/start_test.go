package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// TestStartReadyThenStop: Start returns once the daemon answers on its
// address with its home open; Stop ends it cleanly (nil) and withdraws
// state/daemon.json; a second Stop answers the same.
func TestStartReadyThenStop(t *testing.T) {
	h := home.Home{Dir: filepath.Join(privateTempDir(t), "home")}
	var readyCalled bool
	s, err := Start(context.Background(), Options{Home: h, Listen: "127.0.0.1:0", Ready: func(labapi.DaemonInfo) { readyCalled = true }})
	if err != nil {
		t.Fatal(err)
	}
	if s.Home == nil || s.Home.Engine == nil || !readyCalled || s.Info.Listen == "" {
		t.Fatalf("started: home %v, Ready called %v, info %+v", s.Home, readyCalled, s.Info)
	}
	res, err := http.Get("http://" + s.Info.Listen + "/api/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), `"status":"ok"`) {
		t.Fatalf("health: %d %s", res.StatusCode, b)
	}
	if _, err := os.Stat(h.DaemonFile()); err != nil {
		t.Fatalf("daemon.json while ready: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if _, err := os.Stat(h.DaemonFile()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("daemon.json after Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop = %v", err)
	}
}

// TestStartFailsEarly: a daemon that cannot start returns its error from
// Start (here a home that is a file), instead of waiting for a readiness
// that never comes.
func TestStartFailsEarly(t *testing.T) {
	dir := privateTempDir(t)
	f := filepath.Join(dir, "home")
	if err := os.WriteFile(f, []byte("not a home"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Options{Home: home.Home{Dir: f}, Listen: "127.0.0.1:0"})
	if err == nil || s != nil {
		t.Fatalf("Start on a file = %v, %v; want an error", s, err)
	}
}

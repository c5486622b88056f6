package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// restartableNATS is an in-process JetStream server that can be stopped
// and started again on the same port and store.
type restartableNATS struct {
	t     *testing.T
	store string
	port  int
	srv   *server.Server
}

func (n *restartableNATS) start() {
	n.t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.store, NoLog: true, NoSigs: true})
	if err != nil {
		n.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats not ready")
	}
	n.srv, n.port = s, s.Addr().(*net.TCPAddr).Port
}

func (n *restartableNATS) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// TestServeShipOutageLoggedProcess: 'cmlab serve --ship' logs when
// shipping starts, when NATS goes away (one WARN, however long the outage)
// and when it comes back.
func TestServeShipOutageLoggedProcess(t *testing.T) {
	n := &restartableNATS{t: t, store: t.TempDir(), port: server.RANDOM_PORT}
	n.start()
	t.Cleanup(n.stop)
	h := filepath.Join(t.TempDir(), "home")
	p, _ := serveProc(t, "--home", h, "--quiet", "--ship", fmt.Sprintf("nats://127.0.0.1:%d", n.port))
	logOf := func() string { b, _ := os.ReadFile(filepath.Join(h, "state", "daemon.log")); return string(b) }
	pollUntil(t, "shipping starts", func() bool { return strings.Contains(logOf(), `"msg":"shipping to NATS JetStream"`) })
	n.stop()
	if code, _, errs := cliRun(t, nil, "--home", h, "feedback", "add", "--notes", "during the outage"); code != 0 {
		t.Fatalf("feedback add during the outage = %d %q", code, errs)
	}
	pollUntil(t, "the outage in the daemon log", func() bool {
		return strings.Contains(logOf(), `"level":"WARN","msg":"shipping: NATS unreachable or failing; retrying with backoff (the daemon serves on)"`)
	})
	n.start()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logOf(), `"msg":"shipping recovered"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery line:\n%s", logOf())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := strings.Count(logOf(), "shipping: NATS unreachable"); got != 1 {
		t.Errorf("%d outage lines, want 1:\n%s", got, logOf())
	}
	if !strings.Contains(p.stderr.String(), "WARN  shipping: NATS unreachable or failing") {
		t.Errorf("stderr lacks the outage:\n%s", p.stderr.String())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

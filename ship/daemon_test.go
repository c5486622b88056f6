package ship

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/wal"
)

// TestDaemonShipsAndServesThroughAnOutage runs the shipper as the
// daemon's sidecar (`serve --ship`) with the server down: the daemon
// serves 16 posting clients all along, state/ship.json and /metrics say
// shipping is failing, and once the server is up everything is shipped.
func TestDaemonShipsAndServesThroughAnOutage(t *testing.T) {
	n := startNATS(t)
	n.stop()
	h := home.Home{Dir: t.TempDir()}
	if err := os.Chmod(h.Dir, 0o700); err != nil { // the daemon serves private homes only
		t.Fatal(err)
	}
	s, err := New(Options{Home: h, Conn: n.conn(), Poll: 5 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Home: h, Listen: "127.0.0.1:0", Sidecar: s.Run,
			Ready: func(info labapi.DaemonInfo) { ready <- info }})
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready")
	}
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	c := labapi.NewClient(info.Listen, tok)
	post := func(rounds int) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < rounds; j++ {
					body := map[string]any{"sessionId": info.SessionID, "notes": fmt.Sprintf("client %d post %d", i, j)}
					if err := c.Do(ctx, "POST", "/api/feedback", "", body, nil); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("post while NATS is down: %v", err)
		}
	}
	post(10)
	waitFor(t, "the outage in state/ship.json", func() bool {
		st, err := ReadState(h)
		return err == nil && st.Retrying && strings.Contains(st.LastError, "connect")
	})
	metrics := func() string {
		req, _ := http.NewRequest("GET", "http://"+info.Listen+"/metrics", nil)
		req.Header.Set("X-CM-LAB-TOKEN", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if m := metrics(); !strings.Contains(m, "cmlab_ship_failing 1") || !strings.Contains(m, "cmlab_ship_shipped_seq 0") || strings.Contains(m, "cmlab_ship_lag_events 0\n") {
		t.Fatalf("metrics during the outage:\n%s", m)
	}
	n.start()
	post(5)
	r, _ := wal.OpenReader(h.WALDir())
	waitFor(t, "shipping to catch up", func() bool {
		last, _ := r.LastSeq()
		return s.State().Shipped == last && !s.State().Retrying
	})
	if m := metrics(); !strings.Contains(m, "cmlab_ship_failing 0") || !strings.Contains(m, "cmlab_ship_lag_events 0\n") {
		t.Fatalf("metrics after catching up:\n%s", m)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkStream(t, n, h, s.State().Stream)
}

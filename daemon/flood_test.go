package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// TestIdleConnectionFlood: a daemon whose descriptor limit is 256 (a
// re-executed child) is flooded with 400 idle connections; while they are
// held, and after, feedback POSTs succeed (200), health stays ok, and the
// log is never degraded.
func TestIdleConnectionFlood(t *testing.T) {
	h, info, tok := startFloodDaemon(t)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	post := func(what string) { t.Helper(); floodPost(t, client, info.Listen, tok, what) }
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

// TestIdleSocketFlood: the same flood through the daemon's Unix socket,
// the CLI's way in. Its connections count against the same cap as TCP
// ones: 400 idle ones must not exhaust the descriptors the TCP listener
// and the log need (before, the socket's listener was not capped).
func TestIdleSocketFlood(t *testing.T) {
	h, info, tok := startFloodDaemon(t)
	tcp := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	sock := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", h.DaemonSocket())
		}}}
	post := func(c *http.Client, what string) { t.Helper(); floodPost(t, c, info.Listen, tok, what) }
	post(sock, "before")
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 400 {
		c, err := net.DialTimeout("unix", h.DaemonSocket(), 5*time.Second)
		if err != nil {
			t.Fatalf("flood connection %d: %v", len(flood), err)
		}
		flood = append(flood, c)
	}
	for i := range 3 {
		post(tcp, fmt.Sprintf("tcp-during-%d", i))
		post(sock, fmt.Sprintf("socket-during-%d", i))
	}
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	post(sock, "after")
	lines, err := os.ReadFile(h.FeedbackFile())
	if err != nil || strings.Count(string(lines), "\n") != 8 {
		t.Fatalf("feedback.jsonl after the flood: %v\n%s", err, lines)
	}
}

// floodPost POSTs one feedback entry through c and fails t unless it is
// answered 200 within 5 s.
func floodPost(t *testing.T, c *http.Client, listen, tok, what string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+listen+"/api/feedback", strings.NewReader(`{"notes":"`+what+`"}`))
	req.Header.Set("X-CM-LAB-TOKEN", tok)
	start := time.Now()
	res, err := c.Do(req)
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

// startFloodDaemon starts a daemon whose descriptor limit is 256 (a
// re-executed child, stopped with SIGTERM when the test ends) and reads
// its operator token.
func startFloodDaemon(t *testing.T) (home.Home, *labapi.DaemonInfo, string) {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	cmd, info := startDaemon(t, h, envDaemonNofile+"=256")
	t.Cleanup(func() {
		cmd.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	tok, err := os.ReadFile(info.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return h, info, strings.TrimSpace(string(tok))
}

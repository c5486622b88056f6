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
// the CLI's way in. Its connections are capped too (a budget of their
// own, as large as the TCP port's): 400 idle ones must not exhaust the
// descriptors the TCP listener and the log need (before, the socket's
// listener was not capped).
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

// TestStalledTCPLeavesTheSocket: any local user can reach the TCP port,
// only the owner the Unix socket. 80 TCP connections that each send a
// request's header and then stall in its body (no token needed: net/http
// reads an unread body to its end after the answer) hold more than the
// TCP cap (64 at a descriptor limit of 256) busy, not idle, so nothing of
// theirs can be evicted. The owner's CLI must still be answered through
// the socket while they stall: the socket's connections do not wait for
// the TCP budget (before, they shared it and waited until the stalled
// requests' 60 s read timeout).
func TestStalledTCPLeavesTheSocket(t *testing.T) {
	h, info, tok := startFloodDaemon(t)
	sock := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", h.DaemonSocket())
		}}}
	floodPost(t, sock, info.Listen, tok, "before")
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for range 80 {
		c, err := net.DialTimeout("tcp", info.Listen, 5*time.Second)
		if err != nil {
			t.Fatalf("stalled connection %d: %v", len(stalled), err)
		}
		stalled = append(stalled, c)
		fmt.Fprintf(c, "POST /api/feedback HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", info.Listen)
	}
	// Wait until the daemon serves at least 62 of them (their header read,
	// their body awaited): with one budget for both listeners, that and
	// the slot each listener's pending Accept holds is the whole cap, so
	// the socket's POSTs below meet a full budget.
	deadline := time.Now().Add(10 * time.Second)
	for acceptedOf(t, info.Pid, stalled) < 62 {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon accepted %d of the stalled connections, want 62 or more", acceptedOf(t, info.Pid, stalled))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 3 {
		floodPost(t, sock, info.Listen, tok, fmt.Sprintf("socket-during-%d", i))
	}
	for _, c := range stalled {
		c.Close()
	}
	stalled = nil
	lines, err := os.ReadFile(h.FeedbackFile())
	if err != nil || strings.Count(string(lines), "\n") != 4 {
		t.Fatalf("feedback.jsonl after the stall: %v\n%s", err, lines)
	}
}

// acceptedOf counts the connections of conns (TCP, from this process)
// that process pid has accepted: the daemon's sockets (/proc/PID/fd)
// whose peer, in /proc/net/tcp, is one of their local addresses.
func acceptedOf(t *testing.T, pid int, conns []net.Conn) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	ports := map[string]bool{} // the peers' ports as /proc/net/tcp writes them: 4 hex digits
	for _, c := range conns {
		ports[fmt.Sprintf("%04X", c.LocalAddr().(*net.TCPAddr).Port)] = true
	}
	tab, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(tab), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		// f[2] is the remote address (HEXIP:HEXPORT), f[9] the inode.
		if _, port, ok := strings.Cut(f[2], ":"); ok && ports[port] && inodes[f[9]] {
			n++
		}
	}
	return n
}

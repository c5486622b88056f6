package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/discovery"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/steps"
)

func TestDialInProcessThenDaemon(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	// A stale daemon.json naming a dead pid means no daemon.
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := labapi.WriteDaemonInfo(h, labapi.DaemonInfo{Pid: 1 << 30, Listen: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := labapi.ReadDaemonInfo(h); !errors.Is(err, labapi.ErrNoDaemon) {
		t.Fatalf("dead pid: %v", err)
	}
	// A live pid (reused) whose address refuses connections is no daemon either.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := ln.Addr().String()
	ln.Close()
	labapi.WriteDaemonInfo(h, labapi.DaemonInfo{Pid: os.Getpid(), Listen: closedAddr})
	if _, err := labapi.ReadDaemonInfo(h); !errors.Is(err, labapi.ErrNoDaemon) {
		t.Fatalf("reused pid: %v", err)
	}
	c, closeFn, err := Dial(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if c.Remote {
		t.Fatal("dialled a dead daemon")
	}
	var out struct {
		FeedbackID string `json:"feedbackId"`
	}
	if err := c.Do(ctx, "POST", "/api/feedback", "k1", map[string]any{"notes": "in-process"}, &out); err != nil || out.FeedbackID == "" {
		t.Fatalf("in-process POST: %v %+v", err, out)
	}
	err = c.Do(ctx, "POST", "/api/feedback", "", map[string]any{"ratings": map[string]any{"overall": 101}}, nil)
	var ae *labapi.APIError
	if !errors.As(err, &ae) || ae.Code != labapi.CodeInvalidArgument || ae.Fix() == "" {
		t.Fatalf("error = %#v", err)
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}

	dctx, cancel := context.WithCancel(ctx)
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(dctx, Options{Home: h, Listen: "127.0.0.1:0", Ready: func(i labapi.DaemonInfo) { ready <- i }})
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready")
	}
	c, closeFn, err = Dial(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Remote || c.BaseURL() != "http://"+info.Listen {
		t.Fatalf("client %+v, daemon %+v", c, info)
	}
	var again struct {
		FeedbackID string `json:"feedbackId"`
	}
	if err := c.Do(ctx, "POST", "/api/feedback", "k1", map[string]any{"notes": "in-process"}, &again); err != nil || again.FeedbackID != out.FeedbackID {
		t.Fatalf("dedupe across in-process and daemon: %v %s vs %s", err, again.FeedbackID, out.FeedbackID)
	}
	var page labapi.FeedbackPage
	if err := c.Do(ctx, http.MethodGet, "/api/feedback?since=0", "", nil, &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("poll: %v %+v", err, page)
	}
	// A second daemon on the same home is refused.
	if err := Run(ctx, Options{Home: h, Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("second daemon started")
	}
	closeFn()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if _, err := labapi.ReadDaemonInfo(h); !errors.Is(err, labapi.ErrNoDaemon) {
		t.Fatalf("daemon.json left behind: %v", err)
	}
}

// TestReadOnlyDaemon serves a home read-only: reads work, every write is
// refused with 403, and nothing (not even lab.session.started) is appended.
func TestReadOnlyDaemon(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	c, closeFn, err := Dial(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "POST", "/api/feedback", "", map[string]any{"notes": "before"}, nil); err != nil {
		t.Fatal(err)
	}
	closeFn()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	var dh *Home
	go func() {
		done <- Run(dctx, Options{Home: h, Listen: "127.0.0.1:0", ReadOnly: true,
			Ready: func(i labapi.DaemonInfo) { ready <- i }, Opened: func(h *Home) { dh = h }})
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("read-only daemon: %v", err)
	}
	seq := dh.Engine.Log().LastSeq()
	rc, rclose, err := Dial(ctx, h)
	if err != nil || !rc.Remote || rc.BaseURL() != "http://"+info.Listen {
		t.Fatalf("dial: %v", err)
	}
	defer rclose()
	var page labapi.FeedbackPage
	if err := rc.Do(ctx, "GET", "/api/feedback?since=0", "", nil, &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("read: %v %d", err, len(page.Items))
	}
	err = rc.Do(ctx, "POST", "/api/feedback", "k", map[string]any{"notes": "after"}, nil)
	var ae *labapi.APIError
	if !errors.As(err, &ae) || ae.Code != labapi.CodeForbidden {
		t.Fatalf("write on read-only: %v", err)
	}
	if got := dh.Engine.Log().LastSeq(); got != seq || seq != 1 {
		t.Fatalf("seq %d → %d (want 1, unchanged)", seq, got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStaleDaemonInfoGetsNoToken (issue 15 §4, issue 27 finding 1):
// state/daemon.json names a live pid (this test's, with its true start
// time and boot: as after pid reuse) and a listener on 127.0.0.1 that is
// not this home's daemon, and answers /api/health as the daemon would.
// With no daemon holding state/daemon.lock, clients contact nothing at
// all: ReadDaemonInfo says why the record is stale, Dial works
// in-process, and the listener sees no request, secret or not.
func TestStaleDaemonInfoGetsNoToken(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.OperatorToken(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string // method and path of every request the fake saw
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","walIndex":0}`)
	}))
	defer fake.Close()
	listen := strings.TrimPrefix(fake.URL, "http://")
	self, err := steps.ProcessOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range []labapi.DaemonInfo{
		{Pid: os.Getpid(), Listen: listen, TokenFile: h.TokenFile()},
		{Pid: os.Getpid(), Listen: listen, TokenFile: h.TokenFile(), Socket: h.DaemonSocket(), PidStart: self.Start, BootID: self.BootID},
	} {
		if err := labapi.WriteDaemonInfo(h, info); err != nil {
			t.Fatal(err)
		}
		_, err := labapi.ReadDaemonInfo(h)
		var stale *labapi.StaleDaemonError
		if !errors.Is(err, labapi.ErrNoDaemon) || !errors.As(err, &stale) || !strings.Contains(stale.Why, "daemon.lock") {
			t.Fatalf("record %+v taken for a daemon: %v", info, err)
		}
		c, closeFn, err := Dial(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if c.Remote {
			t.Fatalf("Dial chose the fake listener (%+v)", info)
		}
		if err := c.Do(ctx, "POST", "/api/feedback", "", map[string]any{"notes": "local"}, nil); err != nil {
			t.Fatal(err)
		}
		closeFn()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("the fake listener was contacted: %q", got)
	}
}

// TestDaemonSocketPeerChecked (issue 27 finding 1): with the daemon lock
// held and the recorded process running, the client still sends nothing
// to a socket listener that is not the recorded pid (SO_PEERCRED).
func TestDaemonSocketPeerChecked(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-CM-LAB-TOKEN"))
		mu.Unlock()
		w.Write([]byte(`{"feedbackId":"fb_fake"}`))
	})}
	init1, err := steps.ProcessOf(1) // a live process that is not this one
	if err != nil {
		t.Skipf("no /proc/1/stat: %v", err)
	}
	adv, err := labapi.Advertise(h, labapi.DaemonInfo{Pid: os.Getpid(), Listen: "127.0.0.1:1", TokenFile: h.TokenFile()}, func(ln net.Listener) { go srv.Serve(ln) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adv.Withdraw()
	defer srv.Close()
	// daemon.json says pid 1, with pid 1's true start time: live by the
	// lock and /proc; only the socket's credentials tell.
	info := adv.Info
	info.Pid, info.PidStart = 1, init1.Start
	if err := labapi.WriteDaemonInfo(h, info); err != nil {
		t.Fatal(err)
	}
	if _, err := labapi.ReadDaemonInfo(h); err != nil {
		t.Fatalf("ReadDaemonInfo: %v", err)
	}
	c, closeFn, err := Dial(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	err = c.Do(ctx, "POST", "/api/feedback", "", map[string]any{"notes": "x"}, nil)
	if !errors.Is(err, discovery.ErrPeer) || !strings.Contains(err.Error(), "not the daemon's pid 1") {
		t.Fatalf("Do through a listener of another pid: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		if strings.Contains(g, tok) {
			t.Fatalf("the listener got the operator token: %q", g)
		}
	}
	if len(got) != 0 {
		t.Fatalf("the listener got requests: %q", got)
	}
}

// TestCheckListen (issue 15 §4): only loopback is served without
// --allow-remote; with it, a warning says what is exposed. Nothing here
// binds to a non-loopback address.
func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		listen string
		remote bool
	}{
		{"127.0.0.1:7788", false}, {"127.0.0.2:0", false}, {"[::1]:0", false}, {"localhost:7788", false},
		{"0.0.0.0:7788", true}, {":7788", true}, {"[::]:7788", true}, {"192.168.1.5:7788", true},
		{"10.0.0.1:0", true}, {"example.com:80", true}, {"[::ffff:10.0.0.1]:1", true},
	} {
		w, err := CheckListen(c.listen, false)
		if c.remote != errors.Is(err, ErrRemoteListen) || w != "" {
			t.Errorf("CheckListen(%q, false) = %q, %v; remote %v", c.listen, w, err, c.remote)
		}
		if c.remote && (!strings.Contains(err.Error(), "--allow-remote") || !strings.Contains(err.Error(), c.listen)) {
			t.Errorf("refusal %q does not name the address and --allow-remote", err)
		}
		w, err = CheckListen(c.listen, true)
		if err != nil || (w != "") != c.remote || (c.remote && !strings.Contains(w, "WARNING")) {
			t.Errorf("CheckListen(%q, true) = %q, %v", c.listen, w, err)
		}
	}
	if _, err := CheckListen("nonsense", true); err == nil {
		t.Error("CheckListen accepted an address without a port")
	}
	// Run refuses before touching the home or binding.
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	err := Run(context.Background(), Options{Home: h, Listen: "0.0.0.0:0"})
	if !errors.Is(err, ErrRemoteListen) {
		t.Fatalf("Run on 0.0.0.0: %v", err)
	}
	if _, err := os.Stat(h.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused daemon created its home: %v", err)
	}
}

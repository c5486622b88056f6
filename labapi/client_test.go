package labapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
)

func TestDialInProcessThenDaemon(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	// A stale daemon.json naming a dead pid means no daemon.
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := WriteDaemonInfo(h, DaemonInfo{Pid: 1 << 30, Listen: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDaemonInfo(h); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("dead pid: %v", err)
	}
	// A live pid (reused) whose address refuses connections is no daemon either.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := ln.Addr().String()
	ln.Close()
	WriteDaemonInfo(h, DaemonInfo{Pid: os.Getpid(), Listen: closedAddr})
	if _, err := ReadDaemonInfo(h); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("reused pid: %v", err)
	}
	c, closeFn, err := Dial(ctx, h, DialOptions{})
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
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != CodeInvalidArgument || ae.Fix() == "" {
		t.Fatalf("error = %#v", err)
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}

	dctx, cancel := context.WithCancel(ctx)
	ready := make(chan DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- RunDaemon(dctx, DaemonOptions{Home: h, Listen: "127.0.0.1:0", Ready: func(i DaemonInfo) { ready <- i }})
	}()
	var info DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready")
	}
	c, closeFn, err = Dial(ctx, h, DialOptions{})
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
	var page FeedbackPage
	if err := c.Do(ctx, http.MethodGet, "/api/feedback?since=0", "", nil, &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("poll: %v %+v", err, page)
	}
	// A second daemon on the same home is refused.
	if err := RunDaemon(ctx, DaemonOptions{Home: h, Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("second daemon started")
	}
	closeFn()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if _, err := ReadDaemonInfo(h); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("daemon.json left behind: %v", err)
	}
}

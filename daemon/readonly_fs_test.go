package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/cmlab/cmlab/labapi"
)

// envROFSHome switches the test binary into TestHelperReadOnlyFSDaemon.
const envROFSHome = "CMLAB_TEST_ROFS_HOME"

// TestHelperReadOnlyFSDaemon runs in a mount namespace of its own: it
// bind-mounts the home read-only onto itself, checks that a write there
// really fails with EROFS, then serves it with Run ReadOnly and
// prints the labapi.DaemonInfo as one JSON line, until SIGTERM.
func TestHelperReadOnlyFSDaemon(t *testing.T) {
	dir := crashchild.Role(t, envROFSHome, "TestServeReadOnlyOnReadOnlyFS")
	fail := func(code int, format string, a ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", a...)
		os.Exit(code)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		fail(4, "bind mount: %v", err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		fail(4, "remount read-only: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
		fail(4, "the home is not read-only: writing in it gave %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Run(ctx, Options{Home: home.Home{Dir: dir}, Listen: "127.0.0.1:0", ReadOnly: true,
		Ready: func(info labapi.DaemonInfo) { json.NewEncoder(os.Stdout).Encode(info) }})
	if err != nil {
		fail(3, "daemon: %v", err)
	}
	os.Exit(0)
}

// TestServeReadOnlyOnReadOnlyFS (issue 15 §4): `serve --read-only` works
// on a home mounted read-only (a real EROFS mount, in a mount namespace of
// the child's own): reads answer, writes are 403, nothing in the home
// changes, and the private copy it serves is gone once it stops. Before,
// it died at the log's LOCK: "read-only file system". Needs root to mount.
func TestServeReadOnlyOnReadOnlyFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount the home read-only; run the tests as root to cover it")
	}
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(privateTempDir(t), "home")}
	c, closeFn, err := Dial(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.Do(ctx, "POST", "/api/feedback", "", map[string]any{"notes": fmt.Sprint("before ", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	closeFn()
	before := treeOf(t, h.Dir)

	child := crashchild.Run(t, crashchild.Spec{Test: "TestHelperReadOnlyFSDaemon", Piped: true,
		Env:  []string{envROFSHome + "=" + h.Dir, "TMPDIR=" + os.TempDir()},
		Attr: &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}}) // Go makes / private in it
	ready := make(chan string, 1)
	go func() {
		defer close(ready)
		for {
			l, ok := child.Line()
			if !ok {
				return
			}
			if strings.HasPrefix(l, "{") {
				ready <- l
				child.Drain()
				return
			}
		}
	}()
	var info labapi.DaemonInfo
	select {
	case l, ok := <-ready:
		if !ok {
			t.Fatalf("read-only daemon on a read-only mount exited: %v\n%s", child.Wait(), child.Output())
		}
		if err := json.Unmarshal([]byte(l), &info); err != nil {
			child.Stop()
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		child.Stop()
		t.Fatalf("read-only daemon not ready\n%s", child.Output())
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	tok, err := os.ReadFile(info.TokenFile)
	if err != nil {
		t.Fatalf("token file %s: %v", info.TokenFile, err)
	}
	rc := labapi.NewClient(info.Listen, strings.TrimSpace(string(tok)))
	var page labapi.FeedbackPage
	if err := rc.Do(ctx, "GET", "/api/feedback?since=0", "", nil, &page); err != nil || len(page.Items) != 3 {
		t.Fatalf("read: %v, %d items", err, len(page.Items))
	}
	var health labapi.Health
	if err := rc.Do(ctx, "GET", "/api/health", "", nil, &health); err != nil || !health.ReadOnly || health.Status != "ok" {
		t.Fatalf("health %+v, %v", health, err)
	}
	var ae *labapi.APIError
	if err := rc.Do(ctx, "POST", "/api/feedback", "k", map[string]any{"notes": "after"}, nil); !errors.As(err, &ae) || ae.Code != labapi.CodeForbidden {
		t.Fatalf("write on the read-only daemon: %v", err)
	}
	if err := rc.Do(ctx, "GET", "/api/steps", "", nil, nil); err != nil {
		t.Fatalf("operator route with the copy's token: %v", err)
	}
	child.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("daemon exit: %v\n%s", err, child.Output())
		}
	case <-time.After(30 * time.Second):
		child.Signal(syscall.SIGKILL)
		t.Fatal("daemon did not stop on SIGTERM")
	}
	if copyHome := filepath.Dir(filepath.Dir(info.TokenFile)); !strings.HasPrefix(copyHome, os.TempDir()) || copyHome == h.Dir {
		t.Fatalf("token file %s is not in a private copy", info.TokenFile)
	} else if _, err := os.Stat(filepath.Dir(copyHome)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the private copy %s is left behind: %v", copyHome, err)
	}
	if after := treeOf(t, h.Dir); after != before {
		t.Fatalf("the read-only home changed:\n%s\n---\n%s", before, after)
	}
}

// treeOf lists every file of dir with its mode and bytes.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "%s %v", p, fi.Mode())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&sb, " %q", b)
		}
		sb.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

package daemon

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/labapi"
)

// The other-user tests (auth_uid_test.go, console_uid_test.go,
// peer_uid_test.go) share this setup: a directory others can traverse
// holding a copy of the test binary they can execute, a daemon, and a
// probe — one test function of that binary — run as another uid with its
// arguments as JSON in the environment and its answer as JSON on stdout.

// foreignBase is a fresh directory of mode 0755 (removed at the end of
// the test) holding an executable copy of the test binary; it returns the
// directory and the copy. The caller has checked that it runs as root.
func foreignBase(t *testing.T, prefix string) (base, bin string) {
	t.Helper()
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(base, "labapi.test")
	if err := copyExecutable(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	return base, bin
}

// runDaemon runs a daemon with o until the test ends (a failure to stop
// cleanly fails it) and returns what it advertised once ready.
func runDaemon(t *testing.T, o Options) labapi.DaemonInfo {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	o.Ready = func(i labapi.DaemonInfo) { ready <- i }
	go func() { done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	select {
	case info := <-ready:
		return info
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready")
	}
	return labapi.DaemonInfo{}
}

// runProbe runs the probe test of bin as uid (group uid), in bin's
// directory with HOME there and no CMLAB_HOME, passing args as JSON in
// env, and decodes its JSON answer into res.
func runProbe(t *testing.T, bin string, uid int, test, env string, args, res any) {
	t.Helper()
	b, _ := json.Marshal(args)
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), env+"="+string(b), "HOME="+filepath.Dir(bin), "CMLAB_HOME=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe as uid %d: %v\n%s\n%s", uid, err, out, stderr.String())
	}
	if err := json.Unmarshal(out, res); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
}

func copyExecutable(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

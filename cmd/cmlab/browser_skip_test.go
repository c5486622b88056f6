package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// browserSkipNotice is what a run that skipped the browser tests says.
const browserSkipNotice = "cmd/cmlab: the browser tests (TestLabPage, TestLabBrowser) were SKIPPED: no Chromium (CMLAB_SKIP_BROWSER=1)"

// announceBrowserSkip says that the browser tests were skipped on stdout
// (go test -v shows it) and on the terminal of the person who ran the
// tests: plain `go test ./...` prints nothing of a passing package but its
// "ok" line, so the notice would otherwise be lost.
func announceBrowserSkip() {
	os.Stdout.WriteString(browserSkipNotice + "\n")
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		tty.WriteString("\n*** " + browserSkipNotice + " ***\n")
		tty.Close()
	}
}

// TestBrowserSkipNotice runs the browser test as `go test ./...` would
// from a terminal, on a machine without Chromium and with
// CMLAB_SKIP_BROWSER=1: the package passes, and the terminal is told the
// browser tests did not run.
func TestBrowserSkipNotice(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLabPage$", "-test.count=1")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "PATH" && k != "CI" && k != "CMLAB_CHROMIUM" && k != "CMLAB_SKIP_BROWSER" {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+t.TempDir(), "CMLAB_SKIP_BROWSER=1")
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &out
	// The pty is the child's controlling terminal, its /dev/tty.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	seen := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(ptmx) // ends with EIO once the child is gone
		seen <- b
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the child test did not end\n%s", out.Bytes())
	}
	if err != nil {
		t.Fatalf("the browser test without Chromium and CMLAB_SKIP_BROWSER=1: %v\n%s", err, out.Bytes())
	}
	var onTTY []byte
	select {
	case onTTY = <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal never closed")
	}
	if !strings.Contains(out.String(), browserSkipNotice) {
		t.Errorf("stdout does not say the browser tests were skipped:\n%s", out.Bytes())
	}
	if !strings.Contains(string(onTTY), browserSkipNotice) {
		t.Errorf("the terminal was not told the browser tests were skipped; it got:\n%q", onTTY)
	}
}

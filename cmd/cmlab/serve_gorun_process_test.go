package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeBannerUnderGoRunProcess: started as 'go run ./cmd/cmlab serve'
// starts it (an executable named cmlab in go's temporary build directory)
// with no cmlab on PATH, the banner names 'go run ./cmd/cmlab stop' and
// how to get a binary, not a 'cmlab stop' that does not exist.
func TestServeBannerUnderGoRunProcess(t *testing.T) {
	exeDir := filepath.Join(t.TempDir(), "go-build123456", "b001", "exe")
	if err := os.MkdirAll(exeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(exeDir, "cmlab")
	if err := os.WriteFile(exe, b, 0o700); err != nil {
		t.Fatal(err)
	}
	h := filepath.Join(t.TempDir(), "home")
	p := &cliProc{cmd: cliCmd(t, []string{"PATH=/usr/bin:/bin"}, "serve", "--home", h, "--listen", "127.0.0.1:0"),
		stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Path = exe
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); p.code = p.cmd.ProcessState.ExitCode(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	p.waitStdout(t, "  binary:", 60*time.Second)
	out := p.stdout.String()
	if !strings.Contains(out, "  stop:   Ctrl+C, or 'go run ./cmd/cmlab stop --home "+h+"'\n") ||
		!strings.Contains(out, "('go run ./cmd/cmlab logs -f --home "+h+"')") ||
		!regexp.MustCompile(`(?m)^  binary: none on PATH; 'go install \./cmd/cmlab' puts one in \$\(go env GOPATH\)/bin \(add it to PATH\)$`).MatchString(out) {
		t.Fatalf("banner under go run:\n%s", out)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

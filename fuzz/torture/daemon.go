package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// daemon is one `cmlab serve` child process.
type daemon struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	token  string
	log    *syncBuffer
	exited chan struct{}
	err    error // set when exited is closed
}

// daemonInfo is the part of state/daemon.json the harness needs.
type daemonInfo struct {
	Pid    int    `json:"pid"`
	Listen string `json:"listen"`
}

// startDaemon runs bin serve on homeDir and waits until it answers
// /api/health with its own pid in state/daemon.json.
func startDaemon(ctx context.Context, bin, homeDir string, allowRoots []string, logTo io.Writer, extra ...string) (*daemon, error) {
	args := append([]string{"serve", "--home", homeDir, "--listen", "127.0.0.1:0"}, extra...)
	for _, r := range allowRoots {
		args = append(args, "--allow-root", r)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = homeDir
	buf := &syncBuffer{}
	w := io.Writer(buf)
	if logTo != nil {
		w = io.MultiWriter(w, logTo)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	d := &daemon{cmd: cmd, log: buf, exited: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.exited) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			d.kill()
			return nil, fmt.Errorf("daemon did not become ready in 60s; output:\n%s", tail(buf.String(), 2000))
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("daemon exited before it was ready (%v); output:\n%s", d.err, tail(buf.String(), 2000))
		case <-ctx.Done():
			d.kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		b, err := os.ReadFile(filepath.Join(homeDir, "state", "daemon.json"))
		if err != nil {
			continue
		}
		var info daemonInfo
		if json.Unmarshal(b, &info) != nil || info.Pid != cmd.Process.Pid || info.Listen == "" {
			continue
		}
		tok, err := os.ReadFile(filepath.Join(homeDir, "state", "token"))
		if err != nil {
			continue
		}
		d.base = "http://" + strings.TrimPrefix(info.Listen, "http://")
		d.token = strings.TrimSpace(string(tok))
		hc := &http.Client{Timeout: 2 * time.Second}
		resp, err := hc.Get(d.base + "/api/health")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return d, nil
		}
	}
}

// kill SIGKILLs the daemon (and anything it started in its process group)
// and waits for it to be reaped.
func (d *daemon) kill() {
	if d == nil || d.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// stop asks the daemon to shut down (SIGTERM) and kills it after grace.
func (d *daemon) stop(grace time.Duration) error {
	if d == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return nil
	case <-time.After(grace):
		d.kill()
		return errors.New("daemon ignored SIGTERM; killed")
	}
}

func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// syncBuffer is a buffer safe for the two writers of a child's output and
// a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

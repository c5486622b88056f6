// Package crashchild is the crash tests' child process, written once: a
// test re-executes its own binary (os.Args[0]) running only the test
// function that plays the child, waits until the child is where it
// should die (a line it prints, a marker file, any condition), kills it
// with SIGKILL and checks that SIGKILL is what ended it; then the parent
// reopens what the child left and checks it. The child's side reads its
// role from the environment (Role) and skips when run as a plain test.
package crashchild

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Child is a running child process.
type Child struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer // stderr, and stdout unless piped
	sc  *bufio.Scanner
}

// syncBuffer is Child.out written by the process's copiers.
type syncBuffer struct{ c *Child }

func (w syncBuffer) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(p)
}

// Start runs test (a test function's name) in a child copy of the test
// binary with env (KEY=VALUE) added to this process's environment; the
// child's output is kept for failure messages (Output).
func Start(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	return Run(t, Spec{Test: test, Env: env})
}

// StartPiped is Start with the child's stdout read line by line (Line).
func StartPiped(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	return Run(t, Spec{Test: test, Env: env, Piped: true})
}

// Spec is how Run starts a child.
type Spec struct {
	Test  string   // the test function the child runs
	Env   []string // KEY=VALUE added to this process's environment
	Piped bool     // stdout read line by line (Line) instead of kept
	// Attr, when set, are the child's process attributes (a mount
	// namespace of its own, say).
	Attr *syscall.SysProcAttr
}

// Run starts the child spec describes; Start and StartPiped are its
// common forms.
func Run(t testing.TB, spec Spec) *Child {
	t.Helper()
	c := &Child{cmd: exec.Command(os.Args[0], "-test.run=^"+spec.Test+"$", "-test.count=1", "-test.v=false")}
	c.cmd.Env = append(os.Environ(), spec.Env...)
	c.cmd.SysProcAttr = spec.Attr
	c.cmd.Stderr = syncBuffer{c}
	if spec.Piped {
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.sc = bufio.NewScanner(out)
	} else {
		c.cmd.Stdout = syncBuffer{c}
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Line is the child's next line of stdout (StartPiped); false at its end.
func (c *Child) Line() (string, bool) {
	if c.sc == nil || !c.sc.Scan() {
		return "", false
	}
	return c.sc.Text(), true
}

// Drain discards the rest of the child's stdout (StartPiped) in the
// background, so that a child that keeps printing never blocks on it.
func (c *Child) Drain() {
	if c.sc != nil {
		go func() {
			for c.sc.Scan() {
			}
		}()
	}
}

// Output is what the child wrote to stderr (and stdout unless piped).
func (c *Child) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// Await polls cond until it holds; after timeout it kills the child and
// fails the test, naming what was awaited and the child's output.
func (c *Child) Await(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.Stop()
			t.Fatalf("the child never %s in %v: %s", what, timeout, c.Output())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// AwaitFile is Await for path to exist (a marker the child writes where
// it waits to be killed).
func (c *Child) AwaitFile(t testing.TB, path string, timeout time.Duration) {
	t.Helper()
	c.Await(t, "wrote "+path, timeout, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// Kill sends SIGKILL, reaps the child and fails the test unless SIGKILL
// is what ended it (a child that exited by itself was not killed
// mid-work).
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.Killed(t)
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Signal sends sig to the child (SIGTERM to see it stop cleanly; Kill for
// SIGKILL and its check).
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Wait reaps the child and returns how it ended: nil for exit status 0,
// an *exec.ExitError otherwise.
func (c *Child) Wait() error { return c.cmd.Wait() }

// Stop kills and reaps the child without a check (a test failing anyway).
func (c *Child) Stop() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// Killed reaps a child that something else killed (or that kills
// itself) and fails the test unless SIGKILL ended it.
func (c *Child) Killed(t testing.TB) {
	t.Helper()
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child was not killed: %v\n%s", err, c.Output())
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL\n%s", err, c.Output())
	}
}

// Role is the child's side: the value of env, or the test is skipped
// (run as a plain test, it is the child of parent and has nothing to do).
func Role(t testing.TB, env, parent string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skip("child process of " + parent)
	}
	return v
}

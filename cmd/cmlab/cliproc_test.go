package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The CLI as a process: the test binary re-executed with cliProcEnv set
// runs main() with its arguments, so a test sees exactly what a user sees —
// the exit code, stdout and stderr of a real process, signals included.

// cliProcEnv is the switch of the TestMain in run_process_test.go: with it
// set, the test binary runs main().
const cliProcEnv = envAsCmlab

// cliCmd returns the command that runs the CLI with args. $HOME is a
// temporary directory (so a missing --home never touches the real ~/.cm)
// and $CMLAB_HOME is unset unless env sets it.
func cliCmd(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CMLAB_HOME=") && !strings.HasPrefix(kv, "HOME=") {
			base = append(base, kv)
		}
	}
	cmd.Env = append(append(base, cliProcEnv+"=1", "HOME="+t.TempDir()), env...)
	return cmd
}

// cliRun runs the CLI to its end and returns its exit code, stdout and
// stderr. It fails the test if the process runs longer than a minute.
func cliRun(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return cliRunCmd(t, cliCmd(t, env, args...))
}

// cliRunIn is cliRun with dir as the working directory.
func cliRunIn(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := cliCmd(t, env, args...)
	cmd.Dir = dir
	return cliRunCmd(t, cmd)
}

func cliRunCmd(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	args := cmd.Args[1:]
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("cmlab %q: %v", args, err)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("cmlab %q ran over a minute; stdout %q stderr %q", args, out.String(), errb.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// cliProc is a CLI process started in the background.
type cliProc struct {
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{}
	code   int
}

func cliStart(t *testing.T, env []string, args ...string) *cliProc {
	t.Helper()
	p := &cliProc{cmd: cliCmd(t, env, args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *cliProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitStdout waits until stdout contains s, failing after d.
func (p *cliProc) waitStdout(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stdout.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stdout never had %q: stdout %q stderr %q", s, p.stdout.String(), p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits for the process to exit and returns its code.
func (p *cliProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		t.Fatalf("still running after %s: stdout %q stderr %q", d, p.stdout.String(), p.stderr.String())
		return -1
	}
}

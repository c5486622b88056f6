package steps

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// gateScript holds a step's process at a gate: it reads one line from fd 3
// and only then replaces itself (exec, same pid and start time) with the
// step's command. When the runner dies before opening the gate, the read
// meets end of file and the script exits 125 without running anything (and
// Pdeathsig has killed it already). /bin/sh is the one program every Linux
// system has; the script uses only POSIX sh.
const gateScript = `IFS= read -r go <&3 || exit 125; exec 3<&-; exec "$@"`

// gateExitCode is the exit status of a gated process whose gate closed
// without opening (its runner went away before recording it).
const gateExitCode = 125

// gatedCommand is a step's process started behind a gate (gateScript).
type gatedCommand struct {
	cmd    *exec.Cmd
	gate   *os.File // write end; one line opens the gate, closing it shuts it
	proc   Process
	waited bool
	err    error // of Wait
}

// startGated starts argv (argv[0] looked up in the runner's PATH, as
// exec.Command does) in dir with env, held at the gate.
//
// The process leads its own process group (Setpgid), so the runner can kill
// whatever the step forks with one kill(-pgid), and has Pdeathsig SIGKILL:
// it is killed when its parent dies. Linux sends that signal when the
// *thread* that forked the child exits, not the process; the Go runtime
// may end an OS thread (a goroutine that exits while locked to its
// thread), so the caller must hold its goroutine on its OS thread
// (runtime.LockOSThread) from before this call until the process has been
// waited for: a locked thread is neither reused by other goroutines nor
// ended while its goroutine runs, so the signal fires only when the runner
// process itself dies. Go's fork path also handles the runner dying
// between fork and prctl (the child then kills itself).
func startGated(argv []string, dir string, env []string, stdout io.Writer) (*gatedCommand, error) {
	path := argv[0]
	if filepath.Base(path) == path {
		lp, err := exec.LookPath(path)
		if err != nil {
			return nil, err
		}
		path = lp
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-c", gateScript, "cmlab-step-gate", path}, argv[1:]...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = stdout
	cmd.Stderr = stdout
	cmd.ExtraFiles = []*os.File{r} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A process the step leaves behind may hold its output open; the
	// runner kills the group once the step ends, and WaitDelay bounds the
	// wait for such pipes in any case.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	r.Close()
	g := &gatedCommand{cmd: cmd, gate: w}
	proc, err := ProcessOf(cmd.Process.Pid)
	if err != nil {
		g.stop()
		return nil, fmt.Errorf("steps: reading the start time of pid %d: %w", cmd.Process.Pid, err)
	}
	g.proc = proc
	return g, nil
}

// open lets the process run the step's command.
func (g *gatedCommand) open() error {
	_, err := g.gate.Write([]byte("go\n"))
	if cerr := g.gate.Close(); err == nil {
		err = cerr
	}
	return err
}

// wait waits for the process once and returns its end.
func (g *gatedCommand) wait() error {
	if !g.waited {
		g.waited, g.err = true, g.cmd.Wait()
	}
	return g.err
}

// stop kills the step's process group and reaps the process: once it
// returns, the recorded process no longer runs (Process.Running). The
// runner defers it on every way out, a panic included.
func (g *gatedCommand) stop() {
	g.kill()
	g.wait()
}

// kill SIGKILLs the step's process group (ESRCH — nothing left — is fine)
// and shuts the gate.
func (g *gatedCommand) kill() {
	g.gate.Close()
	if err := syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		g.cmd.Process.Kill()
	}
}

package steps

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond every 5 ms until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func running(t *testing.T, p Process) bool {
	t.Helper()
	ok, err := p.Running()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestProcessRunning(t *testing.T) {
	self, err := ProcessOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.Start == 0 || self.BootID == "" {
		t.Fatalf("ProcessOf(self) = %+v", self)
	}
	if !running(t, self) {
		t.Fatal("this process is not running")
	}
	// The same pid with another start time is a reused pid.
	if running(t, Process{Pid: self.Pid, Start: self.Start + 1, BootID: self.BootID}) {
		t.Fatal("a reused pid counts as running")
	}
	if running(t, Process{Pid: self.Pid, Start: self.Start, BootID: "another-boot"}) {
		t.Fatal("a process of another boot counts as running")
	}
	if running(t, Process{}) {
		t.Fatal("the zero process counts as running")
	}
}

// TestProcessRunningGroup: a step's process that ended while something it
// forked still runs in its group is running; once the group is empty, not.
func TestProcessRunningGroup(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & echo $! > "+dir+"/bg; exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := ProcessOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil { // the leader is gone and reaped
		t.Fatal(err)
	}
	b, err := os.ReadFile(dir + "/bg")
	if err != nil {
		t.Fatal(err)
	}
	bg, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { syscall.Kill(bg, syscall.SIGKILL) })
	if !running(t, p) {
		t.Fatalf("pid %d's group still has sleep %d, but it does not count as running", p.Pid, bg)
	}
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	waitFor(t, "the group to be empty", func() bool { return !running(t, p) })
}

// TestGatedStart: the process waits at its gate (nothing of the command
// runs), then runs the command under the same pid and start time; a gate
// shut without opening ends it without running anything.
func TestGatedStart(t *testing.T) {
	dir := t.TempDir()
	g, err := startGated([]string{"sh", "-c", "echo $$ > pid"}, dir, []string{"PATH=" + os.Getenv("PATH")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !running(t, g.proc) {
		t.Fatal("gated process not running")
	}
	// The command cannot have run: the gate is closed.
	if _, err := os.Stat(dir + "/pid"); !os.IsNotExist(err) {
		t.Fatalf("the command ran before the gate opened: %v", err)
	}
	if err := g.open(); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dir + "/pid")
	if strings.TrimSpace(string(b)) != strconv.Itoa(g.proc.Pid) {
		t.Fatalf("the command ran as pid %q, the recorded process is %d", b, g.proc.Pid)
	}

	g, err = startGated([]string{"sh", "-c", "echo ran > ran"}, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.gate.Close() // what a runner's death does to the gate
	err = g.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != gateExitCode {
		t.Fatalf("shut gate: %v, want exit %d", err, gateExitCode)
	}
	if _, err := os.Stat(dir + "/ran"); !os.IsNotExist(err) {
		t.Fatal("the command ran though its gate never opened")
	}
}

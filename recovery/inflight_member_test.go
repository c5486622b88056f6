package recovery

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/steps"
)

// TestInFlightNamesALiveMember (issue 27 item 11): a step's process (its
// group's leader) has exited but a process it forked still runs in its
// group. The plan says in_flight, and must name the live process — the
// recorded pid alone names a dead one, which no operator can wait for or
// stop.
func TestInFlightNamesALiveMember(t *testing.T) {
	// The leader starts a sleep in its group, prints its pid, waits for a
	// line on stdin, then exits.
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; read x")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	leader := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-leader, syscall.SIGKILL) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	member, _ := strconv.Atoi(strings.TrimSpace(line))
	proc, err := steps.ProcessOf(leader)
	if err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	cmd.Wait() // the leader is gone and reaped; the sleep lives on
	if alive, err := proc.Running(); err != nil || !alive {
		t.Fatalf("the group should count as running: %v %v", alive, err)
	}

	s := &steps.StepState{MandateID: "m1", StepID: "s1", Status: events.StatusExecuting, ObservedPreHash: "sha256-x",
		Pid: proc.Pid, PidStart: proc.Start, BootID: proc.BootID}
	plan := BuildPlan([]*steps.MandateState{{MandateID: "m1", Status: events.StatusExecuting, Steps: []*steps.StepState{s}}},
		PlanOptions{Hash: func(*steps.StepState) (string, error) { return "", nil }})
	ps := planStep(t, plan, "s1")
	if ps.Verdict != InFlight || ps.Pid != leader {
		t.Fatalf("plan line %+v, want in_flight for pid %d", ps, leader)
	}
	if ps.LivePid != member || !strings.Contains(ps.Note, fmt.Sprintf("pid %d", member)) || !strings.Contains(ps.Evidence.Detail, fmt.Sprintf("pid %d", member)) {
		t.Fatalf("plan line %+v: want the live member pid %d named (live_pid, note, evidence)", ps, member)
	}
}

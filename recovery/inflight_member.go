package recovery

import (
	"fmt"

	"github.com/cmlab/cmlab/steps"
)

// nameLiveMember completes an in_flight line whose recorded process has
// exited while its process group lives on: the line then names a live
// member (LivePid, the note and the evidence's detail), the process an
// operator can wait for or stop. liveMember is PlanOptions.LiveMember.
func nameLiveMember(ps *PlanStep, s *steps.StepState, liveMember func(steps.Process) (int, error)) {
	pid, err := liveMember(s.Process())
	if err != nil || pid == 0 || pid == s.Pid {
		return
	}
	ps.LivePid = pid
	ps.Evidence.Detail = fmt.Sprintf("pid %d (the step's process) has exited; pid %d of its process group still runs", s.Pid, pid)
	ps.Note = fmt.Sprintf("pid %d of the step's process group still runs (its leader, pid %d, has exited): wait for it (recover --apply --wait) or stop the group (kill -- -%d)", pid, s.Pid, s.Pid)
}

// RunningPid is the process to name for an in_flight line: the live member
// when the recorded process has exited, else the recorded one.
func (s PlanStep) RunningPid() int {
	if s.LivePid != 0 {
		return s.LivePid
	}
	return s.Pid
}

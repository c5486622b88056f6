package steps

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Process names one process across pid reuse and reboots: its pid, its
// start time (field 22 of /proc/PID/stat, clock ticks after boot) and the
// boot it ran in (/proc/sys/kernel/random/boot_id). A step.executing
// recorded by a runner carries the step's process so that recovery can
// tell whether it still runs.
type Process struct {
	Pid    int    `json:"pid"`
	Start  uint64 `json:"pid_start"`
	BootID string `json:"boot_id,omitempty"`
}

// procStat is what /proc/PID/stat tells about one process.
type procStat struct {
	state byte   // field 3: R, S, D, Z, X, …
	pgrp  int    // field 5
	start uint64 // field 22
}

// readProcStat parses /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted after its last ')'.
func readProcStat(procDir string, pid int) (procStat, error) {
	b, err := os.ReadFile(procDir + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("steps: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("steps: /proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, fmt.Errorf("steps: /proc/%d/stat pgrp: %w", pid, err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("steps: /proc/%d/stat starttime: %w", pid, err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, start: start}, nil
}

func dead(state byte) bool { return state == 'Z' || state == 'X' || state == 'x' }

// BootID is this boot's id, "" when the kernel does not tell.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ProcessOf names the running process pid (its start time read now).
func ProcessOf(pid int) (Process, error) {
	st, err := readProcStat("/proc", pid)
	if err != nil {
		return Process{}, err
	}
	return Process{Pid: pid, Start: st.start, BootID: BootID()}, nil
}

// Running reports whether p, or a process of the process group it led,
// still runs. A step's process leads its own group (the runner starts it
// with Setpgid), and what the step forked stays in that group unless it
// moves out on purpose; so while any member lives the step may still act.
//
//   - another boot: not running;
//   - the pid with the recorded start time, not a zombie: running;
//   - the pid held by a process with another start time: the pid was
//     reused, which the kernel does only once no process of the old group
//     is left (a pid stays allocated while it names a live group): not
//     running;
//   - the pid gone (or a zombie not reaped yet): running while some
//     process that is not a zombie has the pid as its process group.
//
// It reads /proc only (Linux); the zero Process is never running.
func (p Process) Running() (bool, error) {
	return p.running("/proc", BootID())
}

func (p Process) running(procDir, boot string) (bool, error) {
	if p.Pid <= 0 {
		return false, nil
	}
	if p.BootID != "" && boot != "" && p.BootID != boot {
		return false, nil
	}
	st, err := readProcStat(procDir, p.Pid)
	switch {
	case err == nil && st.start != p.Start:
		return false, nil // reused: the old group is empty
	case err == nil && !dead(st.state):
		return true, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	return groupRunning(procDir, p.Pid)
}

// groupRunning reports whether a process that is not a zombie belongs to
// process group pgrp.
func groupRunning(procDir string, pgrp int) (bool, error) {
	// The common case costs one system call: no member at all, not even
	// a zombie (signal 0 checks without sending).
	if err := syscall.Kill(-pgrp, 0); errors.Is(err, syscall.ESRCH) {
		return false, nil
	}
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(procDir, pid)
		if err != nil {
			continue // gone meanwhile
		}
		if st.pgrp == pgrp && !dead(st.state) {
			return true, nil
		}
	}
	return false, nil
}

// Process is the step's last recorded process (zero when none was).
func (s *StepState) Process() Process {
	return Process{Pid: s.Pid, Start: s.PidStart, BootID: s.BootID}
}

// Runner is the runner of the step's last recorded process (zero when
// none was recorded).
func (s *StepState) Runner() Process {
	return Process{Pid: s.RunnerPid, Start: s.RunnerStart, BootID: s.BootID}
}

package discovery

import (
	"fmt"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

// Stale says why the daemon recorded as p (from state/daemon.json) is not
// running, or "" when it is: its lock on h is held and p's pid runs with
// p's start time in p's boot. err is a failure to find out (the lock file
// cannot be read: the caller is not the home's owner).
func Stale(h home.Home, p steps.Process) (why string, err error) {
	held, err := Held(h)
	if err != nil {
		return "", err
	}
	if !held {
		return "no process holds " + h.Rel(h.DaemonLockFile()) + " (the daemon that wrote it is gone)", nil
	}
	if p.Pid <= 0 || p.Start == 0 || p.BootID == "" {
		return "it records no process start time and boot id (an older cmlab wrote it)", nil
	}
	if boot := steps.BootID(); boot != "" && boot != p.BootID {
		return "it was written before the last reboot", nil
	}
	now, err := steps.ProcessOf(p.Pid)
	if err != nil {
		return fmt.Sprintf("pid %d does not run", p.Pid), nil
	}
	if now.Start != p.Start {
		return fmt.Sprintf("pid %d is another process now (it started at another time)", p.Pid), nil
	}
	return "", nil
}

// Self is this process as a daemon records itself in state/daemon.json.
func Self(pid int) (steps.Process, error) { return steps.ProcessOf(pid) }

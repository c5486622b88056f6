package steps

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
)

// LiveMember names a process that keeps p running (see Running): p's own
// pid while p lives, else a live process of the group p led (the lowest
// pid), else 0. Recovery names it so that an operator can wait for or
// stop what still acts: once the leader is gone its pid names nothing.
func (p Process) LiveMember() (int, error) {
	return p.liveMember("/proc", BootID())
}

func (p Process) liveMember(procDir, boot string) (int, error) {
	running, err := p.running(procDir, boot)
	if err != nil || !running {
		return 0, err
	}
	if st, err := readProcStat(procDir, p.Pid); err == nil && st.start == p.Start && !dead(st.state) {
		return p.Pid, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return 0, err
	}
	best := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(procDir, pid)
		if err != nil || st.pgrp != p.Pid || dead(st.state) {
			continue
		}
		if best == 0 || pid < best {
			best = pid
		}
	}
	return best, nil
}

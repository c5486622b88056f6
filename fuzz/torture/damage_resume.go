package torture

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The kinds a mandate resumed at daemon start-up makes (resume-log,
// dir-resume) are damaged in a home of their own, resumeHome, where the
// next start resumes a mandate again and so appends to the damaged log:
//
//  1. `cmlab run` of a two-step mandate is SIGKILLed while step s1 runs;
//     the step's world (a file nobody writes) is as planned, so a start
//     classifies it safe_to_retry and resumes the mandate (within the
//     lookback window);
//  2. a daemon starts and resumes it: s1 ends, its output goes to
//     state/resume/<mandate>.log, and s2 starts;
//  3. the daemon is SIGKILLed while s2 runs: s2 is interrupted the same
//     way, and every case's serve resumes it, appending to the log.
//
// A step's first run writes its shell's pid to started-<step> and waits in
// that process (exec); a run after that prints a line and ends.

// resumeHomeName is the home's directory under the fixture's root.
const resumeHomeName = "resumed"

// resumeMandate is the mandate's id.
const resumeMandate = "fx-resume"

const resumeSpec = `{"id":"` + resumeMandate + `","name":"resumed at start-up","steps":[` +
	`{"id":"s1","argv":["sh","-c",` + resumeStep + `],"env":["PATH"],"cwd":".","world":["world.txt"]},` +
	`{"id":"s2","argv":["sh","-c",` + resumeStep + `],"env":["PATH"],"cwd":".","world":["world.txt"]}]}`

const resumeStep = `"f=started-$CMLAB_STEP_ID; if [ -e $f ]; then echo resumed $CMLAB_STEP_ID; else echo $$ > $f.tmp && mv $f.tmp $f; exec sleep 300; fi"`

// buildResumeHome makes the home root/resumed (its mandate's directory is
// root/resumed-work) as above.
func buildResumeHome(ctx context.Context, bin, root string) error {
	h, work := filepath.Join(root, resumeHomeName), filepath.Join(root, resumeHomeName+"-work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	mandate := filepath.Join(work, "mandate.json")
	if err := os.WriteFile(mandate, []byte(resumeSpec), 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "--home", h, "--init", "run", mandate)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	pid, err := awaitStep(ctx, work, "s1", exited)
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	if err == nil {
		err = awaitGone(pid)
	}
	if err != nil {
		return fmt.Errorf("fixture: cmlab run %s: %w\n%s", resumeMandate, err, out.String())
	}

	d, err := startDaemon(ctx, bin, h, nil, nil)
	if err != nil {
		return err
	}
	pid, err = awaitStep(ctx, work, "s2", d.exited)
	d.kill()
	if err == nil {
		err = awaitGone(pid)
	}
	if err != nil {
		return fmt.Errorf("fixture: the daemon's resume of %s: %w\n%s", resumeMandate, err, tail(d.log.String(), 2000))
	}
	if _, err := os.Stat(filepath.Join(h, "state", "resume", resumeMandate+".log")); err != nil {
		return fmt.Errorf("fixture: the resumed mandate left no log: %w\n%s", err, tail(d.log.String(), 2000))
	}
	// The killed daemon's daemon.json is the main fixture's kind
	// (daemon-info): here it would only name a dead pid.
	return os.Remove(filepath.Join(h, "state", "daemon.json"))
}

// awaitStep waits until step's first run wrote its pid into work, or its
// runner ended (ended closed).
func awaitStep(ctx context.Context, work, step string, ended <-chan struct{}) (int, error) {
	p := filepath.Join(work, "started-"+step)
	for deadline := time.Now().Add(60 * time.Second); ; {
		if b, err := os.ReadFile(p); err == nil {
			return strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("step %s did not start in 60 s", step)
		}
		select {
		case <-ended:
			return 0, fmt.Errorf("its runner ended before step %s started", step)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// awaitGone waits until the process pid is gone or a zombie (a step dies
// with its runner: Pdeathsig), so that the next start does not find it in
// flight.
func awaitGone(pid int) error {
	for deadline := time.Now().Add(30 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			return fmt.Errorf("the step's process %d outlived its runner", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, st, _ := strings.Cut(string(b[strings.LastIndexByte(string(b), ')')+1:]), " ")
	return !strings.HasPrefix(st, "Z") && !strings.HasPrefix(st, "X")
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStepShowProcess: the output of a step's command is captured as it
// runs; after its runner is SIGKILLed mid-step, 'cmlab step show' prints
// the step left executing and what its command had written — what a
// reviewer needs to settle it.
func TestStepShowProcess(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	gate := filepath.Join(dir, "gate")
	mp := filepath.Join(dir, "m.json")
	spec := fmt.Sprintf(`{"name":"m","steps":[{"id":"s1","argv":["sh","-c","echo rendering frame 1; echo rendered >&2; touch %s; sleep 30"]}]}`, gate)
	if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	run := startCmlab(t, "run", mp, "--home", h, "--init")
	step, _ := stepRunning(t, run.cmd.Process.Pid)
	t.Cleanup(func() { syscall.Kill(-step, syscall.SIGKILL) })
	pollUntil(t, "the step to write its output", func() bool { _, err := os.Stat(gate); return err == nil })
	syscall.Kill(run.cmd.Process.Pid, syscall.SIGKILL)
	run.wait(t)
	syscall.Kill(-step, syscall.SIGKILL)
	code, out, errs := cliRun(t, nil, "step", "show", "m", "s1", "--home", h)
	want := "output:      27 bytes in state/step-output/m/s1.out:\nrendering frame 1\nrendered\n"
	if code != 0 || !strings.HasPrefix(out, "step:        m/s1\nstatus:      executing\n") || !strings.HasSuffix(out, want) || !strings.Contains(out, fmt.Sprintf("process:     pid %d\n", step)) {
		t.Fatalf("step show = %d\n%s%s\nwant suffix\n%s", code, out, errs, want)
	}
	if code, _, errs := cliRun(t, nil, "step", "show", "m", "nope", "--home", h); code != 1 || !strings.Contains(errs, "mandate m has no step nope\n  fix: list its steps with 'cmlab step list m'") {
		t.Fatalf("step show of an unknown step = %d %q", code, errs)
	}
}

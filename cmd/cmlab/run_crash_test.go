package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

const (
	envRunCrashChild = "CMLAB_CMD_RUN_CRASH_CHILD"
	envRunCrashHome  = "CMLAB_CMD_RUN_CRASH_HOME"
	envRunCrashFile  = "CMLAB_CMD_RUN_CRASH_FILE"
)

// TestRunCrashChild is the child of TestRunKilledThenRecoverAndResume: the
// `cmlab run` path (Dial → in-process steps API → runner) with a hook that
// SIGKILLs the process after step b's side effect, before its completion.
func TestRunCrashChild(t *testing.T) {
	if os.Getenv(envRunCrashChild) != "1" {
		t.Skip("crash child only")
	}
	ctx := context.Background()
	h := home.Home{Dir: os.Getenv(envRunCrashHome)}
	path := os.Getenv(envRunCrashFile)
	spec, _ := os.ReadFile(path)
	m, err := steps.ParseMandate(spec)
	if err != nil {
		os.Exit(2)
	}
	c, _, err := daemon.Dial(ctx, h)
	if err != nil {
		os.Exit(2)
	}
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: &clientRecorder{c: c}, Base: filepath.Dir(path), Hook: func(p steps.CrashPoint, s string) {
		if p == steps.AfterSideEffect && s == "b" {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}})
	if err != nil {
		os.Exit(2)
	}
	r.Run(ctx, m, spec)
	os.Exit(3)
}

// TestRunKilledThenRecoverAndResume: `cmlab run` killed between a side
// effect and its completion record; `cmlab recover --apply` sees the
// expected post state and records the step as done; `cmlab run` resumes
// with the remaining step; every side effect happened once.
func TestRunKilledThenRecoverAndResume(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	work := t.TempDir()
	mp := filepath.Join(work, "m.json")
	spec := `{"id":"mk","steps":[
 {"id":"a","argv":["sh","-c","printf a >> a.txt"],"env":["PATH"],"world":["a.txt"],"expect_post":{"a.txt":"a"}},
 {"id":"b","argv":["sh","-c","printf b >> b.txt"],"env":["PATH"],"world":["b.txt"],"expect_post":{"b.txt":"b"}},
 {"id":"c","argv":["sh","-c","printf c >> c.txt"],"env":["PATH"],"world":["c.txt"],"expect_post":{"c.txt":"c"}}]}`
	if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRunCrashChild+"=1", envRunCrashHome+"="+h.Dir, envRunCrashFile+"="+mp)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("child not killed: %v\n%s", err, out)
	}
	// Resuming before recovery is refused: b is still executing.
	code, _, errOut := cli(t, "run", mp, "--home", h.Dir)
	if code != 1 || !strings.Contains(errOut, "cmlab recover --apply") {
		t.Fatalf("run before recover: exit %d %s", code, errOut)
	}
	code, stdout, errOut := cli(t, "recover", "--apply", "--home", h.Dir)
	if code != 0 || !strings.Contains(stdout, "mk       b     executing  already_done   current_state_matches_expected_post  complete") {
		t.Fatalf("recover: exit %d\n%s%s", code, stdout, errOut)
	}
	code, stdout, errOut = cli(t, "run", mp, "--home", h.Dir, "--json")
	if code != 0 || strings.Count(stdout, `"from_log": true`) != 2 || strings.Count(stdout, `"status": "completed"`) != 3 {
		t.Fatalf("resume: exit %d\n%s%s", code, stdout, errOut)
	}
	for f, want := range map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"} {
		if b, _ := os.ReadFile(filepath.Join(work, f)); string(b) != want {
			t.Fatalf("%s = %q, want %q (each side effect exactly once)", f, b, want)
		}
	}
	code, stdout, _ = cli(t, "step", "list", "mk", "--home", h.Dir, "--json")
	if code != 0 || !strings.Contains(stdout, `"recovered": true`) {
		t.Fatalf("list: %s", stdout)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// envAsCmlab makes the test binary the cmlab command itself (os.Args[1:]
// are cmlab's arguments), so that tests run, signal and kill real cmlab
// processes.
const envAsCmlab = "CMLAB_TEST_AS_CMLAB"

// browserSkipped is set when the browser tests were skipped
// (CMLAB_SKIP_BROWSER=1 without Chromium): TestMain says so at the end.
var browserSkipped atomic.Bool

func TestMain(m *testing.M) {
	if os.Getenv(envAsCmlab) == "1" {
		main()
	}
	code := m.Run()
	if browserSkipped.Load() {
		announceBrowserSkip()
	}
	os.Exit(code)
}

// cmlabProc is a cmlab process started by a test.
type cmlabProc struct {
	cmd *exec.Cmd
	out bytes.Buffer // stdout and stderr
}

// startCmlab starts `cmlab args…` as a process leading its own process
// group (as a shell starts a job). The test's cleanup kills it if it runs.
func startCmlab(t *testing.T, args ...string) *cmlabProc {
	t.Helper()
	p := &cmlabProc{cmd: exec.Command(os.Args[0], args...)}
	p.cmd.Env = append(os.Environ(), envAsCmlab+"=1")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// wait waits for the process and returns its exit code (-1: killed).
func (p *cmlabProc) wait(t *testing.T) (code int, signal syscall.Signal) {
	t.Helper()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -1, ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// pollUntil polls cond every 5 ms until it holds or 20 s pass.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procStat returns state and ppid of pid from /proc (ok false: gone).
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != 'Z' && st != 'X'
}

// childOf returns a live child of parent whose command line contains
// word, or 0.
func childOf(parent int, word string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(pid); !ok || ppid != parent || !alive(pid) {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cl, []byte(word)) {
			return pid
		}
	}
	return 0
}

// stepRunning waits until the runner's step has passed its gate and is in
// its `sleep`: returns the step's pid (the runner's child) and the sleep's.
func stepRunning(t *testing.T, runner int) (step, sleep int) {
	t.Helper()
	pollUntil(t, "the step's sleep", func() bool {
		if step = childOf(runner, "sh"); step == 0 {
			return false
		}
		sleep = childOf(step, "sleep")
		return sleep != 0
	})
	return step, sleep
}

func readFileT(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// TestKilledRunRepro is issue 14's repro: `cmlab run` of a one-step
// mandate whose step sleeps then appends; the runner (its process group's
// leader) is SIGKILLed while the step sleeps. While the step's sleep still
// runs, `cmlab recover` answers in_flight (exit 4) naming the step's pid,
// never safe_to_retry; `recover --apply --wait` waits until it is gone and
// resets the step; `cmlab run` again: out holds "two" exactly once.
// (Before the fix: the orphaned step wrote too, and out held it twice.)
// Once with the home opened by each command, once through a daemon: it
// knows the step as one of its clients' runners' and, that runner gone,
// leaves the decision to recovery.
func TestKilledRunRepro(t *testing.T) {
	for _, daemon := range []bool{false, true} {
		t.Run(map[bool]string{false: "no_daemon", true: "daemon"}[daemon], func(t *testing.T) { killedRunRepro(t, daemon) })
	}
}

func killedRunRepro(t *testing.T, daemon bool) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	if daemon {
		serve := startCmlab(t, "serve", "--listen", "127.0.0.1:0", "--quiet", "--home", h)
		pollUntil(t, "the daemon", func() bool { _, err := labapi.ReadDaemonInfo(home.Home{Dir: h}); return err == nil })
		defer func() {
			syscall.Kill(serve.cmd.Process.Pid, syscall.SIGTERM)
			if code, _ := serve.wait(t); code != 0 {
				t.Errorf("serve: exit %d\n%s", code, serve.out.String())
			}
		}()
	}
	if err := os.Mkdir(filepath.Join(dir, "W"), 0o700); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "m.json")
	spec := `{"name":"m","steps":[{"id":"s1","argv":["sh","-c","sleep 3; echo two >> out"],"cwd":"W","env":["PATH"],"world":["W/out"]}]}`
	if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	run := startCmlab(t, "run", mp, "--home", h, "--init") // a new home (issue 18 §1: only --init or serve create one)
	step, sleep := stepRunning(t, run.cmd.Process.Pid)
	t.Cleanup(func() { syscall.Kill(-step, syscall.SIGKILL) })
	syscall.Kill(run.cmd.Process.Pid, syscall.SIGKILL)
	if code, sig := run.wait(t); sig != syscall.SIGKILL {
		t.Fatalf("runner ended with %d %v\n%s", code, sig, run.out.String())
	}
	// The step itself died with its runner (Pdeathsig); what it forked
	// (the sleep) lives on in its process group until it ends.
	pollUntil(t, "the step's process to die with its runner", func() bool { return !alive(step) })

	code, stdout, errOut := cli(t, "recover", "--home", h, "--json")
	sleepLived := alive(sleep)
	var plan struct {
		Steps []struct {
			Verdict  string `json:"verdict"`
			Pid      int    `json:"pid"`
			LivePid  int    `json:"live_pid"`
			Action   string `json:"action"`
			Evidence struct {
				Reason string `json:"reason"`
				Pid    int    `json:"pid"`
			} `json:"evidence"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil || len(plan.Steps) != 1 {
		t.Fatalf("recover: %v\n%s%s", err, stdout, errOut)
	}
	s := plan.Steps[0]
	if s.Verdict == "safe_to_retry" && sleepLived {
		t.Fatalf("recover says safe_to_retry while the step's sleep %d runs", sleep)
	}
	if !sleepLived {
		t.Fatal("the step's sleep ended before recover looked: the check proves nothing (machine too slow?)")
	}
	// The step's pid is recorded; the process still running, named to
	// the operator, is the live member of its group (issue 27 item 11).
	if code != exitNeedReview || s.Verdict != "in_flight" || s.Pid != step || s.Evidence.Pid != step || s.LivePid != sleep || s.Action != "none" ||
		!strings.Contains(errOut, "pid "+strconv.Itoa(sleep)+") still runs") {
		t.Fatalf("recover while in flight: exit %d %+v\n%s", code, s, errOut)
	}

	code, stdout, errOut = cli(t, "recover", "--apply", "--wait", "--home", h)
	if code != 0 || !strings.Contains(errOut, "waiting for m/s1: pid "+strconv.Itoa(sleep)+" still runs") ||
		!strings.Contains(stdout, "safe_to_retry") || !strings.Contains(stdout, "reset") || alive(sleep) {
		t.Fatalf("recover --apply --wait: exit %d\n%s%s", code, stdout, errOut)
	}
	if code, stdout, errOut = cli(t, "run", mp, "--home", h); code != 0 {
		t.Fatalf("run again: exit %d\n%s%s", code, stdout, errOut)
	}
	if got := readFileT(t, filepath.Join(dir, "W", "out")); got != "two\n" {
		t.Fatalf("out = %q, want \"two\\n\" once", got)
	}
}

// TestRunSignalCancelsStep: SIGINT or SIGTERM on a `cmlab run` process
// stops the running step (its whole process group), records step.failed
// with error_class cancelled, says so and exits 1.
func TestRunSignalCancelsStep(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			h := filepath.Join(dir, "home")
			mp := filepath.Join(dir, "c.json")
			spec := `{"id":"c","steps":[{"id":"s1","argv":["sh","-c","sleep 30; echo x >> out"],"env":["PATH"],"world":["out"]}]}`
			if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
				t.Fatal(err)
			}
			run := startCmlab(t, "run", mp, "--home", h, "--init") // a new home (issue 18 §1: only --init or serve create one)
			step, sleep := stepRunning(t, run.cmd.Process.Pid)
			t.Cleanup(func() { syscall.Kill(-step, syscall.SIGKILL) })
			syscall.Kill(run.cmd.Process.Pid, sig)
			code, killed := run.wait(t)
			name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
			out := run.out.String()
			if code != 1 || killed != 0 || !strings.Contains(out, "c/s1: cancelled (cancelled by "+name+"); recorded step.failed (error_class cancelled)") ||
				!strings.Contains(out, "cmlab: c/s1: cancelled by "+name) {
				t.Fatalf("run: exit %d %v\n%s", code, killed, out)
			}
			// The runner killed the step's group before it exited (SIGKILL
			// lands asynchronously; the sleep would last 30 s).
			pollUntil(t, "the step and its sleep to end with the cancelled run", func() bool { return !alive(step) && !alive(sleep) })
			code, stdout, errOut := cli(t, "step", "list", "c", "--home", h, "--json")
			var list []struct {
				Status string `json:"status"`
				Steps  []struct {
					Status     string `json:"status"`
					ErrorClass string `json:"error_class"`
					ErrorMsg   string `json:"error_msg"`
					Pid        int    `json:"pid"`
				} `json:"steps"`
			}
			if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != 0 || len(list) != 1 || len(list[0].Steps) != 1 {
				t.Fatalf("step list: %d %v\n%s%s", code, err, stdout, errOut)
			}
			if s := list[0].Steps[0]; s.Status != "failed" || s.ErrorClass != "cancelled" || s.Pid != step ||
				!strings.Contains(s.ErrorMsg, "pid "+strconv.Itoa(step)+" killed") {
				t.Fatalf("step after the signal: %+v", s)
			}
			if got := readFileT(t, filepath.Join(dir, "out")); got != "" {
				t.Fatalf("out = %q: the cancelled step acted", got)
			}
		})
	}
}

// TestRunCancelSkipsAutoResume: a mandate interrupted by a killed runner
// would be resumed at the daemon's next start; `cmlab run cancel` (a
// process) marks it cancelled, and `cmlab serve` (a process) leaves it
// alone; `cmlab run` refuses it too.
func TestRunCancelSkipsAutoResume(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	mp := filepath.Join(dir, "k.json")
	spec := `{"id":"k","steps":[{"id":"s1","argv":["sh","-c","sleep 30; echo x >> out"],"env":["PATH"],"world":["out"]}]}`
	if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	run := startCmlab(t, "run", mp, "--home", h, "--init") // a new home (issue 18 §1: only --init or serve create one)
	step, _ := stepRunning(t, run.cmd.Process.Pid)
	syscall.Kill(run.cmd.Process.Pid, syscall.SIGKILL)
	run.wait(t)
	// End what the step forked, as its sleep would by itself: left in
	// flight, the mandate would wait for it rather than resume.
	syscall.Kill(-step, syscall.SIGKILL)

	cancel := startCmlab(t, "run", "cancel", "k", "--reason", "wrong inputs", "--home", h)
	// (stdout and stderr together: no daemon, so the notice of an in-process write too.)
	if code, _ := cancel.wait(t); code != 0 || cancel.out.String() != "(no daemon: wrote to "+h+" in-process)\nk: cancelled\n" {
		t.Fatalf("run cancel: exit %d\n%s", code, cancel.out.String())
	}
	// A second cancel is refused: nothing left to cancel.
	if code, _, errOut := cli(t, "run", "cancel", "k", "--home", h); code != 1 || !strings.Contains(errOut, "already cancelled") {
		t.Fatalf("second cancel: %d %s", code, errOut)
	}

	serve := startCmlab(t, "serve", "--listen", "127.0.0.1:0", "--quiet", "--home", h)
	pollUntil(t, "the daemon", func() bool { _, err := labapi.ReadDaemonInfo(home.Home{Dir: h}); return err == nil })
	// Start-up decisions are recorded before the daemon listens: had it
	// resumed k, s1 would be reset (pending) or running now.
	code, stdout, errOut := cli(t, "step", "list", "k", "--home", h, "--json")
	var list []struct {
		Status       string `json:"status"`
		Cancelled    bool   `json:"cancelled"`
		CancelReason string `json:"cancel_reason"`
		Steps        []struct {
			Status      string `json:"status"`
			Transitions int    `json:"transitions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != 0 || len(list) != 1 || len(list[0].Steps) != 1 {
		t.Fatalf("step list: %d %v\n%s%s", code, err, stdout, errOut)
	}
	m := list[0]
	if m.Status != "cancelled" || !m.Cancelled || m.CancelReason != "wrong inputs" || m.Steps[0].Status != "executing" || m.Steps[0].Transitions != 2 {
		t.Fatalf("after the daemon's start: %+v", m)
	}
	// cmlab run refuses a cancelled mandate.
	if code, _, errOut := cli(t, "run", mp, "--home", h); code != 1 || !strings.Contains(errOut, "cancelled") {
		t.Fatalf("run of a cancelled mandate: %d %s", code, errOut)
	}
	syscall.Kill(serve.cmd.Process.Pid, syscall.SIGTERM)
	if code, _ := serve.wait(t); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, serve.out.String())
	}
	if got := readFileT(t, filepath.Join(dir, "out")); got != "" {
		t.Fatalf("out = %q: the cancelled mandate ran", got)
	}
}

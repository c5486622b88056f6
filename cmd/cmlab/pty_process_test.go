package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/spf13/cobra"
)

// ptyProcHome starts a daemon (in this process) over a new home and
// returns the arguments every CLI call needs.
func ptyProcHome(t *testing.T, conv string) (home.Home, []string) {
	t.Helper()
	h := home.Home{Dir: privateDir(t)}
	ptyStartDaemon(t, h)
	return h, []string{"--home", h.Dir, "-c", conv}
}

// TestPtyExecProcess: 'cmlab pty exec' as a process streams the block's
// output, exits with the block's exit code (also with --json and when the
// command ends the shell) and writes nothing else to stdout.
func TestPtyExecProcess(t *testing.T) {
	_, a := ptyProcHome(t, "exec1")
	pty := func(args ...string) (int, string, string) {
		t.Helper()
		return cliRun(t, nil, append(append([]string{"pty"}, args...), a...)...)
	}
	if code, out, errs := pty("exec", "echo hi; echo there"); code != 0 || out != "hi\nthere\n" || errs != "" {
		t.Fatalf("exec = %d %q %q", code, out, errs)
	}
	if code, out, errs := pty("exec", "three() { echo partial; return 3; }; three"); code != 3 || out != "partial\n" || errs != "" {
		t.Fatalf("return 3 = %d %q %q", code, out, errs)
	}
	// exit 3 ends the shell itself (bash says "exit"): still 3, and a note
	// on stderr.
	if code, out, errs := pty("exec", "exit 3"); code != 3 || out != "exit\n" || !strings.Contains(errs, "the shell exited") {
		t.Fatalf("exit 3 = %d %q %q", code, out, errs)
	}
	code, out, errs := pty("exec", "--json", "echo j; false")
	var res struct {
		Block  map[string]any `json:"block"`
		Output string         `json:"output"`
	}
	if code != 1 || errs != "" || json.Unmarshal([]byte(out), &res) != nil || res.Output != "j\n" || res.Block["exit_code"] != float64(1) || res.Block["status"] != "failed" {
		t.Fatalf("--json failing block = %d %q %q", code, out, errs)
	}
	if code, out, errs := pty("exec", "echo after"); code != 0 || out != "after\n" {
		t.Fatalf("exec after a new shell = %d %q %q", code, out, errs)
	}
}

// TestPtyExecStreams: output reaches the CLI's stdout while the block is
// still running, not at its end.
func TestPtyExecStreams(t *testing.T) {
	_, a := ptyProcHome(t, "stream1")
	gate := filepath.Join(t.TempDir(), "gate")
	p := cliStart(t, nil, append([]string{"pty", "exec", "echo first; while [ ! -e " + gate + " ]; do sleep 0.02; done; echo second"}, a...)...)
	p.waitStdout(t, "first\n", 30*time.Second)
	if p.exited() {
		t.Fatalf("exec exited before the block ended: %q", p.stdout.String())
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 || p.stdout.String() != "first\nsecond\n" || p.stderr.String() != "" {
		t.Fatalf("streamed exec = %d %q %q", code, p.stdout.String(), p.stderr.String())
	}
}

// TestPtyExecCtrlC: SIGINT to 'cmlab pty exec' is forwarded to the block as
// Ctrl+C; exec waits for the block's END and exits 130; the terminal is
// free for the next exec.
func TestPtyExecCtrlC(t *testing.T) {
	_, a := ptyProcHome(t, "int1")
	p := cliStart(t, nil, append([]string{"pty", "exec", "echo ready; sleep 60; echo never"}, a...)...)
	p.waitStdout(t, "ready\n", 30*time.Second)
	ptyWaitForeground(t, a, "sleep 60")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 30*time.Second)
	// bash ends the line of a job killed by SIGINT: the block's output
	// has that "\n" too.
	if code != 130 || p.stdout.String() != "ready\n\n" || !strings.Contains(p.stderr.String(), "sent Ctrl+C to block blk_") || !strings.Contains(p.stderr.String(), "cancelled (interrupted)") {
		t.Fatalf("exec after Ctrl+C = %d %q %q", code, p.stdout.String(), p.stderr.String())
	}
	if code, out, errs := cliRun(t, nil, append([]string{"pty", "exec", "echo next"}, a...)...); code != 0 || out != "next\n" {
		t.Fatalf("exec after an interrupted exec = %d %q %q", code, out, errs)
	}
}

// ptyWaitForeground waits until the conversation's foreground program is
// name (so a Ctrl+C reaches it, not the shell between two commands).
func ptyWaitForeground(t *testing.T, a []string, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := cli(t, append([]string{"pty", "status", "--json"}, a...)...)
		var st struct {
			Foreground string `json:"foreground"`
		}
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && strings.Contains(st.Foreground, name) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never in the foreground: %d %s", name, code, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var blockIDRe = regexp.MustCompile(`block (blk_[0-9a-f]+) is still running`)

// TestPtyExecTimeout: a block still running at --timeout is left running;
// exec exits 124 and says how to follow and interrupt it, and those
// commands work; a busy terminal is refused with a CLI fix, not raw JSON.
func TestPtyExecTimeout(t *testing.T) {
	_, a := ptyProcHome(t, "to1")
	pty := func(args ...string) (int, string, string) {
		t.Helper()
		return cliRun(t, nil, append(append([]string{"pty"}, args...), a...)...)
	}
	code, out, errs := pty("exec", "--timeout", "500ms", "echo started; sleep 60")
	m := blockIDRe.FindStringSubmatch(errs)
	if code != 124 || out != "started\n" || m == nil || !strings.Contains(errs, "cmlab pty follow -c to1 "+m[1]) || !strings.Contains(errs, "cmlab pty interrupt -c to1") {
		t.Fatalf("exec timeout = %d %q %q", code, out, errs)
	}
	code, out, errs = pty("exec", "echo second")
	if code != 1 || out != "" || !strings.Contains(errs, "cmlab: the terminal of conversation \"to1\" is busy: block "+m[1]+" is running\n") || !strings.Contains(errs, "fix: see what runs with 'cmlab pty status'") || strings.Contains(errs, "{") {
		t.Fatalf("exec while busy = %d %q %q", code, out, errs)
	}
	if code, out, errs := pty("interrupt"); code != 0 || !regexp.MustCompile(`^sent Ctrl\+C to block `+m[1]+`, resume_cursor [0-9]+\n$`).MatchString(out) {
		t.Fatalf("interrupt = %d %q %q", code, out, errs)
	}
	if code, out, errs := pty("follow", m[1]); code != 130 || out != "started\n\n" || !strings.Contains(errs, "cancelled (interrupted)") {
		t.Fatalf("follow = %d %q %q", code, out, errs)
	}
}

// exec and follow wait for their block without a limit unless --timeout
// (or the old --timeout-ms) was given: the waits' 30 s default is not
// theirs, even when given explicitly it is.
func TestPtyFollowTimeout(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 0},
		{[]string{"--timeout", "2s"}, 2 * time.Second},
		{[]string{"--timeout", "30s"}, 30 * time.Second},
		{[]string{"--timeout-ms", "1500"}, 1500 * time.Millisecond},
		{[]string{"--timeout", "2s", "--timeout-ms", "1500"}, 1500 * time.Millisecond},
	} {
		o := &ptyOpts{}
		cmd := &cobra.Command{Use: "exec"}
		cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Second, "") // as newPtyCmd
		cmd.Flags().Int64Var(&o.timeoutMs, "timeout-ms", 0, "")
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		if got := o.followTimeout(cmd); got != c.want {
			t.Errorf("%q: followTimeout = %v, want %v", c.args, got, c.want)
		}
	}
}

// TestPtyWaitDefaultsToEnd: 'pty wait' and 'pty prompt' without --from
// never match output that was there before they started.
func TestPtyWaitDefaultsToEnd(t *testing.T) {
	_, a := ptyProcHome(t, "w1")
	pty := func(args ...string) (int, string, string) {
		t.Helper()
		return cliRun(t, nil, append(append([]string{"pty"}, args...), a...)...)
	}
	if code, _, errs := pty("exec", "echo OLD-OUTPUT"); code != 0 {
		t.Fatalf("exec = %d %q", code, errs)
	}
	code, out, errs := pty("wait", "OLD-OUTPUT", "--timeout", "300ms")
	if code != 1 || !strings.HasPrefix(out, "timeout, resume_cursor ") || !strings.Contains(errs, "no match within 300ms") || !strings.Contains(errs, "fix: wait again with --from ") {
		t.Fatalf("wait without --from = %d %q %q", code, out, errs)
	}
	if code, out, errs := pty("prompt", "--timeout", "300ms"); code != 1 || !strings.HasPrefix(out, "timeout") {
		t.Fatalf("prompt without --from = %d %q %q", code, out, errs)
	}
	if code, out, errs := pty("wait", "OLD-OUTPUT", "--from", "0", "--timeout", "5s"); code != 0 || !strings.HasPrefix(out, `matched "OLD-OUTPUT" at `) {
		t.Fatalf("wait --from 0 = %d %q %q", code, out, errs)
	}
}

// TestPtyStatusSlots: 'pty status' lists the shell slots in use; 'pty end'
// frees the conversation's.
func TestPtyStatusSlots(t *testing.T) {
	_, a := ptyProcHome(t, "s1")
	pty := func(args ...string) (int, string, string) {
		t.Helper()
		return cliRun(t, nil, append(append([]string{"pty"}, args...), a...)...)
	}
	pty("exec", "true")
	code, out, errs := pty("status")
	if code != 0 || !strings.Contains(out, "shell slots: 1 of 64 in use (idle shells ended after 30m0s)\n  s1 ") {
		t.Fatalf("status = %d %q %q", code, out, errs)
	}
	if code, out, errs := pty("end"); code != 0 || out != "nothing was running; the shell ended and its slot is free\n" {
		t.Fatalf("end = %d %q %q", code, out, errs)
	}
	if code, out, _ := pty("status"); code != 0 || !strings.Contains(out, "shell slots: 0 of 64 in use") {
		t.Fatalf("status after end = %d %q", code, out)
	}
}

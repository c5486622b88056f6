package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRoughEdgesProcess: the CLI's leftover rough edges, each as a user
// meets it: a --type that matches nothing, an unknown completion shell and
// a bare 'replay' are usage errors (exit 2), not empty output or help with
// exit 0; the errors that left the user guessing name a fix; a mandate
// whose cwd is missing says so (not that the shell is missing); bad
// mandate JSON says where.
func TestRoughEdgesProcess(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	if code, _, errs := cliRun(t, nil, "--home", h, "--init", "feedback", "add", "--notes", "x"); code != 0 {
		t.Fatalf("feedback add = %d %q", code, errs)
	}
	for _, tc := range []struct {
		args []string
		code int
		errs []string
	}{
		{[]string{"replay", "print", "--type", "bogus"}, 2, []string{`cmlab: --type "bogus" matches no event type`, "feedback.submitted"}},
		{[]string{"wal", "dump", "--type", "nonsense"}, 2, []string{`cmlab: --type "nonsense" matches no event type`}},
		{[]string{"completion", "tcsh"}, 2, []string{`cmlab: unknown command "tcsh" for "cmlab completion"`}},
		{[]string{"replay"}, 2, []string{"cmlab: replay needs what to do: --to SEQ", "  fix: run 'cmlab replay --help'"}},
		{[]string{"trace", "nope"}, 1, []string{"no event mentions this id: nope\n  fix: trace takes an id the log holds"}},
		{[]string{"run", filepath.Join(dir, "missing.json")}, 1, []string{"no such file or directory\n  fix: check the mandate file's path"}},
	} {
		code, out, errs := cliRun(t, nil, append(tc.args, "--home", h)...)
		if code != tc.code || out != "" {
			t.Errorf("%v = %d %q %q, want exit %d", tc.args, code, out, errs, tc.code)
		}
		for _, w := range tc.errs {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errs, w)
			}
		}
	}
	full := filepath.Join(dir, "full")
	os.Mkdir(full, 0o700)
	os.WriteFile(filepath.Join(full, "x"), nil, 0o600)
	if code, _, errs := cliRun(t, nil, "replay", "--to", "1", "--into", full, "--home", h); code != 1 || !strings.Contains(errs, "not empty (1 entries)\n  fix: --into makes a new home") {
		t.Errorf("replay --into a non-empty dir = %d %q", code, errs)
	}
	if code, _, errs := cliRun(t, nil, "status", "--home", filepath.Join(full, "x")); code != 1 || !strings.Contains(errs, "  fix: --home (or $CMLAB_HOME) must name the home's directory, not a file") {
		t.Errorf("status --home FILE = %d %q", code, errs)
	}
	b, _ := os.ReadFile(filepath.Join(h, "feedback", "feedback.jsonl"))
	os.WriteFile(filepath.Join(h, "feedback", "feedback.jsonl"), append([]byte("X"), b[1:]...), 0o600)
	if code, _, errs := cliRun(t, nil, "--json", "replay", "--check", "--home", h); code != 1 || !strings.HasPrefix(errs, `{"error":{"code":"DIVERGED","message":"views diverge`) || !strings.Contains(errs, `"fix":"the views differ from what the log produces: 'cmlab rebuild --home `+h) {
		t.Errorf("replay --check --json on a damaged view = %d %q", code, errs)
	}
	nocwd := filepath.Join(dir, "nocwd.json")
	os.WriteFile(nocwd, []byte(`{"name":"m","steps":[{"id":"s1","argv":["true"],"cwd":"nodir"}]}`), 0o600)
	if code, _, errs := cliRun(t, nil, "run", nocwd, "--home", h); code != 1 || !strings.Contains(errs, "the step's working directory "+filepath.Join(dir, "nodir")+": stat ") || strings.Contains(errs, "/bin/sh") {
		t.Errorf("run with a missing cwd = %d %q", code, errs)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\"name\":\"m\",\"steps\":[{\"id\":\"s1\",\n\"argv\":[\"true\"]"), 0o600)
	if code, _, errs := cliRun(t, nil, "run", bad, "--home", h); code != 1 || !strings.Contains(errs, "invalid mandate: unexpected EOF at line 2, column 16 (the file ends inside the JSON") {
		t.Errorf("run with cut JSON = %d %q", code, errs)
	}
}

// TestOneNamePerMeaningProcess: the auto-resume window has one name in
// --help, --resume-window (compact's too); serve's old --lookback still
// works, hidden. runs import --help says --topic is a fallback. status
// names a read-only daemon and its version.
func TestOneNamePerMeaningProcess(t *testing.T) {
	_, out, _ := cliRun(t, nil, "serve", "--help")
	if !strings.Contains(out, "--resume-window duration") || strings.Contains(out, "--lookback") {
		t.Errorf("serve --help:\n%s", out)
	}
	if _, out, _ := cliRun(t, nil, "compact", "--help"); !strings.Contains(out, "(the daemon's: cmlab serve --resume-window)") {
		t.Errorf("compact --help:\n%s", out)
	}
	if _, out, _ := cliRun(t, nil, "runs", "import", "--help"); !strings.Contains(out, "when its script.json names none (a fallback: the title in script.json wins)") {
		t.Errorf("runs import --help:\n%s", out)
	}
	h := filepath.Join(t.TempDir(), "home")
	p, _ := serveProc(t, "--home", h, "--quiet", "--lookback", "1h", "--read-only")
	code, out, errs := cliRun(t, nil, "status", "--home", h)
	if code != 0 || !regexp.MustCompile(`(?m)^daemon:      running, pid \d+ at http://\S+ \(session lab_\S+, read-only: every write is refused\), version \S+\n`).MatchString(out) {
		t.Errorf("status of a read-only daemon = %d\n%s%s", code, out, errs)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

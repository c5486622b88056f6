package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
)

// TestErrorsProcess: errors name the flag or command to type, never an
// HTTP route, a request body or a Go package; with --json they are one
// JSON object on stderr and the exit code is the same.
func TestErrorsProcess(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	hf := []string{"--home", h.Dir}
	for _, c := range []struct {
		args []string
		code int
		want string // exact stderr
	}{
		{[]string{"feedback", "add", "--rating", "overall=abc"}, 2,
			"cmlab: --rating overall=abc: VALUE must be an integer 0–100\n  fix: run 'cmlab feedback add --help'\n"},
		{[]string{"experiments", "create"}, 2,
			"cmlab: required flag(s) \"baseline\" not set\n  fix: run 'cmlab experiments create --help'\n"},
		{[]string{"experiments", "create", "--baseline", "run_nope"}, 1,
			"cmlab: NOT_FOUND: Run not found: run_nope\n  fix: list the runs with 'cmlab runs list'; import one with 'cmlab runs import PATH'\n"},
		{[]string{"experiments", "get", "exp_nope"}, 1,
			"cmlab: NOT_FOUND: Experiment not found: exp_nope\n  fix: list the experiments with 'cmlab experiments list'\n"},
		{[]string{"--json", "experiments", "get", "exp_nope"}, 1,
			`{"error":{"code":"NOT_FOUND","message":"Experiment not found: exp_nope","fix":"list the experiments with 'cmlab experiments list'"}}` + "\n"},
		{[]string{"--json", "runs", "list", "--bogus"}, 2,
			`{"error":{"code":"USAGE","message":"unknown flag: --bogus","fix":"run 'cmlab runs list --help'"}}` + "\n"},
		{[]string{"feedback", "poll", "--since", "abc"}, 1,
			"cmlab: INVALID_CURSOR: Invalid cursor: abc\n  fix: pass the nextCursor printed by the last 'cmlab feedback poll --json' to --since, or --since 0 to start over\n"},
	} {
		code, out, errs := cliRun(t, nil, append(hf, c.args...)...)
		if code != c.code || out != "" || errs != c.want {
			t.Errorf("%v = %d %q\n%q\nwant %d\n%q", c.args, code, out, errs, c.code, c.want)
		}
	}
	// A submit body that is not JSON is caught before it is sent.
	bad := h.Dir + "/bad.json"
	os.WriteFile(bad, []byte(`{"a": 1e}`), 0o600)
	code, _, errs := cliRun(t, nil, append(hf, "experiments", "submit", "exp_x", "--body", bad)...)
	if code != 2 || !strings.HasPrefix(errs, "cmlab: --body "+bad+" is not valid JSON: ") {
		t.Errorf("bad --body = %d %q", code, errs)
	}
	// The log held by a process that is no daemon: said in words.
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	code, _, errs = cliRun(t, nil, append(hf, "feedback", "add", "--notes", "x")...)
	want := fmt.Sprintf("cmlab: the log is in use by another process (pid %d) that does not serve it as a daemon (no state/daemon.json)\n", os.Getpid())
	if code != 1 || !strings.HasPrefix(errs, want) || !strings.Contains(errs, "  fix: wait for that process to finish") {
		t.Errorf("locked log = %d %q", code, errs)
	}
	code, _, errs = cliRun(t, nil, append(hf, "--json", "feedback", "add", "--notes", "x")...)
	var env struct {
		Error struct{ Code, Message, Fix string } `json:"error"`
	}
	if code != 1 || json.Unmarshal([]byte(errs), &env) != nil || env.Error.Code != "LOCKED" || env.Error.Fix == "" {
		t.Errorf("--json locked log = %d %q", code, errs)
	}
}

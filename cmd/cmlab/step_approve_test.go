package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/steps"
)

// TestStepApproveProcess: `cmlab step approve M S` settles an interrupted
// step with no hash typed: the world the plan declares is hashed and
// recorded as the post hash, with the approval's evidence and the note; a
// pending step is refused with the reason.
func TestStepApproveProcess(t *testing.T) {
	h := privateDir(t)
	work := t.TempDir()
	out := filepath.Join(work, "out.txt")
	os.WriteFile(out, []byte("before\n"), 0o600)
	plan := filepath.Join(work, "plan.json")
	os.WriteFile(plan, []byte(fmt.Sprintf(`{"steps":[{"step_id":"s","tool":"deploy","params_hash":"%s","world":["out.txt"],"dir":%q},{"step_id":"t","tool":"x","params_hash":"%s"}]}`,
		steps.HashBytes([]byte("p")), work, steps.HashBytes([]byte("q")))), 0o600)
	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := cliRun(t, nil, append(args, "--home", h)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, stdout, stderr)
		}
		return stdout, stderr
	}
	run(0, "step", "plan", "m1", plan, "--init")
	run(0, "step", "start", "m1", "s")
	os.WriteFile(out, []byte("after\n"), 0o600) // the side effect, then the runner died
	if _, stderr := run(1, "step", "approve", "m1", "t"); !strings.Contains(stderr, "pending") {
		t.Fatalf("approve a pending step: %q", stderr)
	}
	stdout, _ := run(0, "step", "approve", "m1", "s", "--note", "out.txt says after")
	if strings.TrimSpace(stdout) != "m1/s: completed" {
		t.Fatalf("approve: %q", stdout)
	}
	want, _ := steps.WorldHash(work, []string{"out.txt"})
	stdout, _ = run(0, "step", "list", "m1", "--json")
	var ms []*steps.MandateState
	if err := json.Unmarshal([]byte(stdout), &ms); err != nil || len(ms) != 1 {
		t.Fatalf("list: %v %q", err, stdout)
	}
	s := ms[0].Steps[0]
	if s.Status != "completed" || s.PostHash != want || !s.Recovered || s.Evidence == nil ||
		s.Evidence.Reason != "operator_approved" || s.Evidence.Detail != "out.txt says after" {
		t.Fatalf("step after approve: %+v evidence %+v", s, s.Evidence)
	}
}

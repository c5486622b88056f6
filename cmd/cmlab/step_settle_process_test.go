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

// TestStepCompleteHashesPlannedWorldProcess: a person settling a step in
// review by hand has no hashes. `cmlab step complete M S` hashes the world
// the step's plan declares (its paths under its dir) and derives the result
// hash from --exit-code and --output; what it cannot know, it asks for.
func TestStepCompleteHashesPlannedWorldProcess(t *testing.T) {
	h := privateDir(t)
	work := t.TempDir()
	out := filepath.Join(work, "out.txt")
	if err := os.WriteFile(out, []byte("before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(work, "plan.json")
	os.WriteFile(plan, []byte(fmt.Sprintf(`{"steps":[{"step_id":"s","tool":"deploy","params_hash":"%s","world":["out.txt"],"dir":%q}]}`,
		steps.HashBytes([]byte("p")), work)), 0o600)
	logFile := filepath.Join(work, "step.log")
	os.WriteFile(logFile, []byte("deployed\n"), 0o600)

	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := cliRun(t, nil, append(args, "--home", h)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, stdout, stderr)
		}
		return stdout, stderr
	}
	run(0, "step", "plan", "m1", plan, "--init")
	stdout, _ := run(0, "step", "start", "m1", "s") // observed pre: the planned world, hashed now
	if !strings.Contains(stdout, "m1/s: executing") {
		t.Fatalf("start: %q", stdout)
	}
	os.WriteFile(out, []byte("after\n"), 0o600) // the side effect

	// No result information: a usage error naming the flags, nothing recorded.
	_, stderr := run(2, "step", "complete", "m1", "s")
	if !strings.Contains(stderr, "--exit-code N with --output FILE") {
		t.Fatalf("complete without a result: stderr %q", stderr)
	}
	stdout, _ = run(0, "step", "complete", "m1", "s", "--exit-code", "0", "--output", logFile)
	if !strings.Contains(stdout, "m1/s: completed") {
		t.Fatalf("complete: %q", stdout)
	}

	stdout, _ = run(0, "step", "list", "m1", "--json")
	var ms []*steps.MandateState
	if err := json.Unmarshal([]byte(stdout), &ms); err != nil || len(ms) != 1 || len(ms[0].Steps) != 1 {
		t.Fatalf("list: %v %q", err, stdout)
	}
	st := ms[0].Steps[0]
	wantPost, err := steps.WorldHash(work, []string{"out.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if st.PostHash != wantPost {
		t.Fatalf("post_hash %q, want the planned world's hash now %q", st.PostHash, wantPost)
	}
	if want := steps.ResultHash(0, steps.HashBytes([]byte("deployed\n"))); st.ResultHash != want {
		t.Fatalf("result_hash %q, want %q", st.ResultHash, want)
	}
	if st.ObservedPreHash == "" || st.ObservedPreHash == wantPost {
		t.Fatalf("observed_pre_hash %q: want the hash of the world before the side effect", st.ObservedPreHash)
	}

	// A step whose plan declares no world: complete asks for the hash.
	plan2 := filepath.Join(work, "plan2.json")
	os.WriteFile(plan2, []byte(fmt.Sprintf(`{"steps":[{"step_id":"t","tool":"x","params_hash":"%s"}]}`, steps.HashBytes([]byte("q")))), 0o600)
	run(0, "step", "plan", "m2", plan2)
	_, stderr = run(2, "step", "complete", "m2", "t", "--exit-code", "0", "--output-digest", steps.HashBytes(nil))
	if !strings.Contains(stderr, "declares no world paths") || !strings.Contains(stderr, "--post HASH or --world PATH") {
		t.Fatalf("complete of a world-less step: stderr %q", stderr)
	}
	// An unknown step is named.
	_, stderr = run(1, "step", "complete", "m1", "nope", "--exit-code", "0", "--output", logFile)
	if !strings.Contains(stderr, "mandate m1 has no step nope") {
		t.Fatalf("unknown step: stderr %q", stderr)
	}
}

// TestRecoverListsFailedStepsAsFailedProcess: a step whose runner saw it
// fail is listed by `cmlab recover` as failed with its error class, not as
// interrupted, and does not make recover exit 4.
func TestRecoverListsFailedStepsAsFailedProcess(t *testing.T) {
	h := privateDir(t)
	work := t.TempDir()
	mp := filepath.Join(work, "bad.json")
	os.WriteFile(mp, []byte(`{"id":"m2","steps":[{"id":"x","argv":["sh","-c","echo nope > out; exit 7"],"cwd":"`+work+`","env":["PATH"],"world":["out"]}]}`), 0o600)
	if code, stdout, stderr := cliRun(t, nil, "run", mp, "--home", h, "--init"); code != 1 {
		t.Fatalf("failing run: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr := cliRun(t, nil, "recover", "--home", h)
	if code != 0 {
		t.Fatalf("recover: exit %d\n%s%s", code, stdout, stderr)
	}
	var line string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "m2 ") {
			line = strings.Join(strings.Fields(l), " ")
		}
	}
	if !strings.HasPrefix(line, "m2 x failed failed error_class=exit_status ") || strings.Contains(stdout, "interrupted") {
		t.Fatalf("recover table line %q\n%s", line, stdout)
	}
}

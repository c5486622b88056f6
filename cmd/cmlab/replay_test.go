package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayCommandsOnDemoHome runs the commands of docs/debugging.md on a
// demo home and checks their exit codes and the facts they must print.
func TestReplayCommandsOnDemoHome(t *testing.T) {
	tmp := t.TempDir()
	d := filepath.Join(tmp, "demo")
	code, out, errs := cli(t, "demo", "--home", d, "--no-terminal", "--json")
	if code != 0 {
		t.Fatalf("demo: %d %s", code, errs)
	}
	var demo struct {
		ExperimentID   string   `json:"experimentId"`
		SubmitFeedback []string `json:"submitFeedbackIds"`
		LastSeq        uint64   `json:"lastSeq"`
	}
	if err := json.Unmarshal([]byte(out), &demo); err != nil || demo.LastSeq == 0 {
		t.Fatalf("demo --json: %v\n%s", err, out)
	}

	code, out, _ = cli(t, "replay", "print", "--home", d, "--type", "experiment.", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("print --type experiment. --json: %d, %d lines\n%s", code, len(lines), out)
	}
	var ev struct {
		Type string          `json:"type"`
		Req  string          `json:"req"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil || ev.Type != "experiment.submitted" || ev.Req != "demo-submit-1" || !bytes.Contains(ev.Data, []byte(`"status":"done"`)) {
		t.Fatalf("second experiment event: %v %+v", err, ev)
	}

	// --start (and its old hidden name --since) is the earliest time.
	var secondEv struct {
		TS int64 `json:"ts"`
	}
	json.Unmarshal([]byte(lines[1]), &secondEv)
	for _, flag := range []string{"--start", "--since"} {
		code, out, errs = cli(t, "replay", "print", "--home", d, "--type", "experiment.", flag, fmt.Sprint(secondEv.TS), "--json")
		if n := len(strings.Split(strings.TrimSpace(out), "\n")); code != 0 || n != 1 || !strings.Contains(out, `"experiment.submitted"`) {
			t.Fatalf("print %s %d: exit %d, %d lines\n%s%s", flag, secondEv.TS, code, n, out, errs)
		}
	}

	code, out, _ = cli(t, "trace", "demo-submit-1", "--home", d)
	if code != 0 || !strings.Contains(out, "experiment.created") || !strings.Contains(out, "experiment.submitted") {
		t.Fatalf("trace: %d\n%s", code, out)
	}
	for _, fb := range demo.SubmitFeedback {
		if !strings.Contains(out, fb+" ← resp.feedbackIds[") {
			t.Fatalf("trace does not show feedback %s:\n%s", fb, out)
		}
	}
	if code, _, errs = cli(t, "trace", "no-such-id", "--home", d); code != 1 || !strings.Contains(errs, "no event mentions") {
		t.Fatalf("trace of an unknown id: %d %s", code, errs)
	}

	code, out, _ = cli(t, "replay", "--check", "--decode", "--home", d)
	if code != 0 || !strings.Contains(out, "check: identical") || !strings.Contains(out, "decode: all") {
		t.Fatalf("check on a clean home: %d\n%s", code, out)
	}

	code, out, _ = cli(t, "replay", "steps", "demo-mandate", "--what-if", "--home", d)
	if code != 0 || !strings.Contains(out, "executing s2  FRAGILE") || !strings.Contains(out, "manual_review") {
		t.Fatalf("what-if: %d\n%s", code, out)
	}

	into := filepath.Join(tmp, "at7")
	code, out, errs = cli(t, "replay", "--to", "7", "--into", into, "--home", d)
	if code != 0 || !strings.Contains(out, "replayed 7 events (seq 1–7") {
		t.Fatalf("replay --to 7: %d %s %s", code, out, errs)
	}
	if code, _, _ = cli(t, "replay", "--to", "7", "--into", into, "--home", d); code != 1 {
		t.Fatalf("replay into a non-empty directory: exit %d, want 1", code)
	}
	if code, _, _ = cli(t, "replay", "--to", "7", "--home", d); code != 2 {
		t.Fatalf("replay --to without --into: exit %d, want 2", code)
	}
	if code, _, _ = cli(t, "replay", "--until", "yesterday", "--into", filepath.Join(tmp, "u"), "--home", d); code != 2 {
		t.Fatalf("replay --until with a bad time: exit %d, want 2", code)
	}

	// A view edited behind the log's back: --check names file and offset, exit 1.
	runs := filepath.Join(d, "lab", "runs.jsonl")
	fi, err := os.Stat(runs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(runs, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{\"runId\":\"run_forged\"}\n")
	f.Close()
	code, out, errs = cli(t, "replay", "--check", "--home", d)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("first lab/runs.jsonl at byte %d", fi.Size())) || !strings.Contains(errs, "views diverge") {
		t.Fatalf("check after a forged line: %d\n%s\n%s", code, out, errs)
	}

	// A byte changed inside the second run's line: --json names the import.
	b, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:fi.Size()] // drop the forged line
	second := bytes.IndexByte(b, '\n') + 1
	b[second+2] ^= 0x01
	if err := os.WriteFile(runs, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "replay", "--check", "--json", "--home", d)
	var rep struct {
		Check struct {
			Identical bool `json:"identical"`
			First     struct {
				File   string `json:"file"`
				Offset int64  `json:"offset"`
				Seq    uint64 `json:"seq"`
				Event  struct {
					Type string `json:"type"`
					Req  string `json:"req"`
				} `json:"event"`
			} `json:"first"`
		} `json:"check"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("check --json: %d %v\n%s", code, err, out)
	}
	f0 := rep.Check.First
	if rep.Check.Identical || f0.File != "lab/runs.jsonl" || f0.Offset != int64(second+2) || f0.Seq != 3 || f0.Event.Type != "run.imported" || f0.Event.Req != "demo-import-2" {
		t.Fatalf("check --json first divergence %+v", f0)
	}
	// --from past that import ignores it.
	if code, out, _ = cli(t, "replay", "--check", "--from", "4", "--home", d); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("check --from 4: %d\n%s", code, out)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

func TestRebuildCommand(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	var batch []*events.Event
	for ev := range projections.Workload(projections.WorkloadEveryType, 21, 800) {
		batch = append(batch, ev)
		if len(batch) == 4 {
			if _, err := e.Append(ctx, batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	// While the daemon (this engine) holds the log: --check works, an
	// in-place rebuild is refused and touches nothing.
	if code, out, errs := cli(t, "rebuild", "--check", "--home", h.Dir); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("check with a live engine: code %d\n%s%s", code, out, errs)
	}
	if code, _, errs := cli(t, "rebuild", "--home", h.Dir); code != 1 || !strings.Contains(errs, "daemon holds the log") {
		t.Fatalf("in-place rebuild under a lock: code %d %s", code, errs)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// A flipped byte is named by file and offset, exit 1.
	runs := filepath.Join(h.Dir, "lab", "runs.jsonl")
	b, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(b)
	b[10] ^= 0x20
	os.WriteFile(runs, b, 0o600)
	code, out, errs := cli(t, "rebuild", "--check", "--home", h.Dir)
	if code != 1 || !strings.Contains(out, "DIFFERENT: lab/runs.jsonl at line 1, offset 10") || !strings.Contains(out, "fix: stop the daemon and run `cmlab rebuild`") ||
		!strings.Contains(errs, "lab/runs.jsonl differs at line 1, offset 10") || !strings.Contains(errs, "fix: stop the daemon and run `cmlab rebuild`") {
		t.Fatalf("check of a tampered view: code %d\n%s%s", code, out, errs)
	}
	// The JSON report says the same.
	code, out, _ = cli(t, "rebuild", "--check", "--json", "--home", h.Dir)
	if code != 1 || !strings.Contains(out, `"diffFile": "lab/runs.jsonl"`) || !strings.Contains(out, `"diffOffset": 10`) || !strings.Contains(out, `"diffLine": 1`) {
		t.Fatalf("json check: code %d\n%s", code, out)
	}

	// In place: the tampered view is rewritten from the log.
	if code, out, errs := cli(t, "rebuild", "--home", h.Dir); code != 0 {
		t.Fatalf("in-place rebuild: code %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(runs); !bytes.Equal(b, orig) {
		t.Fatal("in-place rebuild did not restore lab/runs.jsonl")
	}
	if code, out, errs := cli(t, "rebuild", "--check", "--home", h.Dir); code != 0 {
		t.Fatalf("check after in-place rebuild: code %d\n%s%s", code, out, errs)
	}

	// --into a new directory: identical views; never into a home with a log.
	into := filepath.Join(t.TempDir(), "copy")
	if code, out, errs := cli(t, "rebuild", "--into", into, "--home", h.Dir); code != 0 {
		t.Fatalf("rebuild --into: code %d\n%s%s", code, out, errs)
	}
	if d, err := projections.Compare(h, home.Home{Dir: into}); err != nil || d != nil {
		t.Fatalf("--into differs: %v %v", d, err)
	}
	if code, _, _ := cli(t, "rebuild", "--into", h.Dir, "--home", into); code == 0 {
		t.Fatal("rebuild --into a home with a log was allowed")
	}
	if code, _, _ := cli(t, "rebuild", "--check", "--into", into, "--home", h.Dir); code != 2 {
		t.Fatalf("--check with --into: code %d, want usage error 2", code)
	}
}

// TestRebuildInPlaceFlippedFeedbackProcess is issue 14 §3's repro with the
// CLI as a process: one flipped byte in feedback.jsonl (an id digit, so
// the damaged line carries another line's id), then `cmlab rebuild`:
// nothing is appended to the log, the damaged line is in quarantine/ and
// reported with its offset, and rebuild --check passes.
func TestRebuildInPlaceFlippedFeedbackProcess(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		ev := events.MustNew("lab_s1", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%04d", i), SessionID: "lab_s1"}})
		if _, err := e.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	last := e.Log().LastSeq()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(h.FeedbackFile())
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(b)
	at := bytes.Index(b, []byte(`"id":"fb_0101"`)) + len(`"id":"fb_010`)
	start := int64(bytes.LastIndexByte(b[:at], '\n') + 1)
	b[at] ^= 0x01 // fb_0101 → fb_0100, an id the log holds
	if err := os.WriteFile(h.FeedbackFile(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPChildProcess$")
	cmd.Env = append(os.Environ(), mcpChildEnv+"=1", mcpChildArgs+"="+strings.Join([]string{"rebuild", "--json", "--home", h.Dir}, "\x1f"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cmlab rebuild: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var rep rebuildReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Views == nil {
		t.Fatalf("report %v\n%s", err, stdout.String())
	}
	if rep.LastSeq != last || len(rep.Views.SetAside) != 1 || rep.Views.SetAside[0].Offset != start || rep.Views.SetAside[0].Line != 102 ||
		rep.Views.SetAside[0].Reason != "replaced" || rep.Views.Foreign != 0 {
		t.Fatalf("report: last seq %d (want %d), set aside %+v, foreign %d", rep.LastSeq, last, rep.Views.SetAside, rep.Views.Foreign)
	}
	if q, err := os.ReadFile(filepath.Join(h.Dir, rep.Views.SetAside[0].Quarantine)); err != nil || !bytes.Contains(q, []byte(`"id":"fb_0100"`)) {
		t.Fatalf("quarantined %q %v", q, err)
	}
	if got, _ := os.ReadFile(h.FeedbackFile()); !bytes.Equal(got, orig) {
		t.Fatal("feedback.jsonl not restored to the log's projection")
	}
	code, out, errs := cli(t, "wal", "stat", "--home", h.Dir)
	if code != 0 || strings.Contains(out, "feedback.ingested") || !strings.Contains(out, fmt.Sprintf("seq 1..%d", last)) {
		t.Fatalf("wal stat after rebuild: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := cli(t, "rebuild", "--check", "--home", h.Dir); code != 0 {
		t.Fatalf("rebuild --check: exit %d\n%s%s", code, out, errs)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
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

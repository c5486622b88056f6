package main

import (
	"encoding/json"
	"regexp"
	"testing"
)

// bench rebuild prints its result as every bench does: one indented JSON
// object with --json, else one line.
func TestBenchRebuildSmoke(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	code, out, errs := walCLI(t, "--json", "rebuild", "--events", "300")
	var res benchRebuildResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Events != 300 || res.EventsPerSec <= 0 || res.LogBytes <= 0 || res.ViewBytes <= 0 {
		t.Fatalf("--json: exit %d, %q, %s", code, out, errs)
	}
	if !regexp.MustCompile(`^\{\n  "events": 300,\n`).MatchString(out) {
		t.Fatalf("--json is not indented JSON: %q", out)
	}
	code, out, errs = walCLI(t, "rebuild", "--events", "300")
	if code != 0 || !regexp.MustCompile(`^rebuild: 300 events in [0-9.]+s = [0-9]+ events/s \(log [0-9.]+ MiB, views [0-9.]+ MiB, [0-9.]+ MiB/s written; [0-9.]+ CPU-seconds on [0-9]+ cores\)\n$`).MatchString(out) {
		t.Fatalf("text: exit %d, %q, %s", code, out, errs)
	}
}

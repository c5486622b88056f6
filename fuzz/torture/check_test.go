package torture

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChecksCatchViolations feeds the invariant checks homes that break
// each invariant on purpose: the harness must be able to fail.
func TestChecksCatchViolations(t *testing.T) {
	line := func(id, notes string) string {
		return `{"schemaVersion":1,"id":"` + id + `","createdAt":"2026-02-06T00:00:00.000Z","notes":"` + notes + `"}` + "\n"
	}
	cases := []struct {
		name     string
		feedback string
		setup    func(l *ledger)
		want     string
	}{
		{"duplicate", line("fb_1", "torture r1 w1 n1") + line("fb_1", "torture r1 w1 n1"), func(l *ledger) {
			l.fbAcked["fb_1"] = "torture r1 w1 n1"
			l.markers["torture r1 w1 n1"] = true
		}, "appears 2 times"},
		{"lost", line("fb_2", "torture r1 w1 n2"), func(l *ledger) {
			l.fbAcked["fb_1"] = "torture r1 w1 n1"
			l.markers["torture r1 w1 n1"], l.markers["torture r1 w1 n2"] = true, true
		}, "fb_1 (\"torture r1 w1 n1\") is missing"},
		{"unacked twice", line("fb_1", "torture r1 w1 n1") + line("fb_2", "torture r1 w1 n1"), func(l *ledger) {
			l.fbMaybe["torture r1 w1 n1"] = true
			l.markers["torture r1 w1 n1"] = true
		}, "present 2 times"},
		{"phantom", line("fb_9", "torture r9 w9 n9"), func(l *ledger) {}, "marker never sent"},
		{"partial line", line("fb_1", "x") + `{"schemaVersion":1`, func(l *ledger) {}, "partial line"},
		{"lost run", "", func(l *ledger) { l.runs["run_1"] = "dir" }, "run run_1 is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "feedback"), 0o700)
			os.WriteFile(filepath.Join(dir, "feedback", "feedback.jsonl"), []byte(tc.feedback), 0o600)
			h := &harness{home: dir, l: newLedger(), rng: rand.New(rand.NewPCG(1, 1))}
			tc.setup(h.l)
			h.checkViews(1)
			if !strings.Contains(strings.Join(h.l.violations, "\n"), tc.want) {
				t.Fatalf("violations %q, want one containing %q", h.l.violations, tc.want)
			}
		})
	}
}

func TestDiffViews(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		os.MkdirAll(filepath.Join(d, "lab"), 0o700)
		os.MkdirAll(filepath.Join(d, "wal"), 0o700)
		os.WriteFile(filepath.Join(d, "lab", "runs.jsonl"), []byte("{\"runId\":\"run_1\"}\n"), 0o600)
		os.WriteFile(filepath.Join(d, "wal", "ignored"), []byte(d), 0o600) // not a view
	}
	if d := DiffViews(a, b); len(d) != 0 {
		t.Fatalf("identical views differ: %v", d)
	}
	os.WriteFile(filepath.Join(b, "lab", "runs.jsonl"), []byte("{\"runId\":\"run_2\"}\n"), 0o600)
	os.MkdirAll(filepath.Join(a, "steps"), 0o700)
	os.WriteFile(filepath.Join(a, "steps", "steps.jsonl"), []byte("x\n"), 0o600)
	d := DiffViews(a, b)
	if len(d) != 2 || !strings.Contains(d[0], "lab/runs.jsonl: live 18 bytes, rebuild 18 bytes, first difference at byte 14") || !strings.Contains(d[1], "steps/steps.jsonl: missing in the rebuild") {
		t.Fatalf("diff %q", d)
	}
}

// TestCheckReplayed: an event appended to a replayed home is a violation
// unless its mark was deleted; moving events (compaction) is not.
func TestCheckReplayed(t *testing.T) {
	before := map[string]uint64{"a": 1, "b": 2}
	grown := map[string]uint64{"a": 1, "b": 2, "c": 3}
	for _, tc := range []struct {
		damage string
		after  map[string]uint64
		want   int
	}{{"flip", grown, 1}, {"unreadable", grown, 1}, {"delete", grown, 0}, {"flip", before, 0}} {
		if got := checkReplayed(tc.damage, before, tc.after); len(got) != tc.want {
			t.Errorf("%s, %d events after: %q, want %d violation(s)", tc.damage, len(tc.after), got, tc.want)
		}
	}
}

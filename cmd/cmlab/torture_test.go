package main

import (
	"strings"
	"testing"
)

// TestTortureCorruptionCommand runs `cmlab torture --corruption` on a small
// sample: exit 0 and the campaign's summary line. (The crash loop itself is
// tested in fuzz/torture, which builds this binary.)
func TestTortureCorruptionCommand(t *testing.T) {
	code, out, errs := cli(t, "torture", "--corruption", "--sample", "8", "--seed", "3", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if !strings.Contains(out, "flips 8 (detected at the right frame 8") || !strings.Contains(out, "violations 0") {
		t.Fatalf("summary: %s", out)
	}
}

func TestTortureUsage(t *testing.T) {
	if code, _, errs := cli(t, "torture", "--rounds", "x"); code != exitUsage {
		t.Fatalf("bad --rounds: exit %d, want %d (%s)", code, exitUsage, errs)
	}
}

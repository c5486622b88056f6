package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTortureCorruptionCommand runs `cmlab torture --corruption` on a small
// sample: exit 0 and the campaign's summary line. (The crash loop itself is
// tested in fuzz/torture, which builds this binary.)
func TestTortureCorruptionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(&globalOpts{stdout: &out, stderr: &errb}, []string{"torture", "--corruption", "--sample", "8", "--seed", "3", "--dir", t.TempDir()})
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "flips 8 (detected at the right frame 8") || !strings.Contains(out.String(), "violations 0") {
		t.Fatalf("summary: %s", out.String())
	}
}

func TestTortureUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(&globalOpts{stdout: &out, stderr: &errb}, []string{"torture", "--rounds", "x"}); code != exitUsage {
		t.Fatalf("bad --rounds: exit %d, want %d (%s)", code, exitUsage, errb.String())
	}
}

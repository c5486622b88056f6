package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRunsCmlabBench: `cmlab bench ARGS` becomes cmlab-bench ARGS
// (found on $PATH; --json passed on), its output and exit code unchanged;
// without cmlab-bench it is a usage error that says how to get it.
func TestBenchRunsCmlabBench(t *testing.T) {
	empty := t.TempDir()
	code, out, errs := cliRun(t, []string{"PATH=" + empty}, "bench", "wal", "--n", "5")
	if code != exitUsage || out != "" || !strings.Contains(errs, "cmlab-bench, not found beside cmlab or on $PATH") || !strings.Contains(errs, "go install ./cmd/cmlab-bench") {
		t.Fatalf("without cmlab-bench: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"cmlab-bench:$*\"\nexit 7\n"
	if err := os.WriteFile(filepath.Join(bin, "cmlab-bench"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs = cliRun(t, []string{"PATH=" + bin}, "--json", "bench", "wal", "--n", "5")
	if code != 7 || out != "cmlab-bench:--json wal --n 5\n" || errs != "" {
		t.Fatalf("with cmlab-bench: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

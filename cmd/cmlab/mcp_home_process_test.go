package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPMissingHomeProcess (issue 27 item 11): `cmlab mcp` given a home
// that does not exist exits with the "no home" error every other command
// gives, and creates nothing.
func TestMCPMissingHomeProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nohome")
	code, out, errs := cliRun(t, nil, "mcp", "--home", dir)
	wantCode, _, wantErrs := cliRun(t, nil, "feedback", "add", "--notes", "x", "--home", dir)
	if code != 1 || out != "" || !strings.Contains(errs, "no cmlab home at "+dir) || errs != wantErrs || code != wantCode {
		t.Fatalf("mcp = %d %q %q; feedback add = %d %q", code, out, errs, wantCode, wantErrs)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cmlab mcp created %s: %v", dir, err)
	}
}

package main

import (
	"bytes"
	"testing"
)

// walCLI runs cmlab-bench with args, returning its exit code, stdout and
// stderr.
func walCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(&globalOpts{stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

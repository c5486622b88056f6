package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunRefusesNonRegularMandate (issue 27 item 11): `cmlab run` once read
// its mandate with os.ReadFile, so the zero device grew its memory without
// bound (6 GB in 20 s) and a FIFO with no writer hung it. Both must be
// refused at once, naming the file, with exit 1 and nothing created.
func TestRunRefusesNonRegularMandate(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "mandate.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", fifo, dir} {
		done := make(chan struct{})
		var code int
		var errs string
		go func() {
			defer close(done)
			code, _, errs = cli(t, "--home", filepath.Join(dir, "home"), "--init", "run", p)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("cmlab run %s still runs after 20 s", p)
		}
		if code != exitError || !strings.Contains(errs, "not a regular file") || !strings.Contains(errs, p) {
			t.Fatalf("cmlab run %s: exit %d, stderr %q; want %d naming the file as not a regular file", p, code, errs, exitError)
		}
	}
}

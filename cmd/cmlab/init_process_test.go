package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitEverywhereProcess: --init creates the home before the command
// and says so once, on every command that uses a home (status, a read
// without a daemon, a poll that reads twice, the log's own tools);
// without it those refuse a missing home and create nothing; serve checks
// its flags before it creates anything.
func TestInitEverywhereProcess(t *testing.T) {
	for _, args := range [][]string{
		{"status"}, {"runs", "list"}, {"feedback", "poll"}, {"experiments", "list"},
		{"wal", "verify"}, {"recover"}, {"rebuild"}, {"replay", "print"}, {"step", "list"},
	} {
		name := strings.Join(args, " ")
		h := filepath.Join(t.TempDir(), "h")
		code, out, errs := cliRun(t, nil, append([]string{"--home", h}, args...)...)
		// The log's own tools (wal, replay) say there is no log instead.
		want := "cmlab: no cmlab home at " + h + " (from --home)\n  fix: "
		if args[0] == "wal" || args[0] == "replay" {
			want = "cmlab: "
		}
		if code != 1 || out != "" || !strings.HasPrefix(errs, want) {
			t.Errorf("%s without a home = %d %q %q", name, code, out, errs)
		}
		if _, err := os.Stat(h); !os.IsNotExist(err) {
			t.Errorf("%s without --init created %s: %v", name, h, err)
		}
		code, out, errs = cliRun(t, nil, append([]string{"--home", h, "--init"}, args...)...)
		if code != 0 || !strings.HasPrefix(errs, "cmlab: created a new home in "+h+"\n") || strings.Count(errs, "created a new home") != 1 {
			t.Errorf("%s --init = %d %q %q", name, code, out, errs)
		}
		if _, err := os.Stat(filepath.Join(h, "wal")); err != nil {
			t.Errorf("%s --init made no home: %v", name, err)
		}
	}
	h := filepath.Join(t.TempDir(), "new")
	code, _, errs := cliRun(t, nil, "serve", "--home", h, "--listen", "127.0.0.1:99999")
	if code != 2 || !strings.Contains(errs, "the port must be a number from 0 to 65535") {
		t.Fatalf("serve --listen :99999 = %d %q", code, errs)
	}
	if _, err := os.Stat(h); !os.IsNotExist(err) {
		t.Fatalf("serve with a bad --listen created the home: %v", err)
	}
	code, _, errs = cliRun(t, nil, "step", "list", "m9", "--home", filepath.Join(t.TempDir(), "s"), "--init")
	if code != 1 || !strings.Contains(errs, "no mandate m9\n  fix: list the mandates with 'cmlab step list' (no argument)") {
		t.Fatalf("step list m9 = %d %q", code, errs)
	}
}

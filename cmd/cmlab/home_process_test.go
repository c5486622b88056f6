package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingHomeProcess: no command creates a home by accident; status
// and the Lab commands name the home they did not find; --init creates it.
func TestMissingHomeProcess(t *testing.T) {
	userHome := t.TempDir()
	env := []string{"HOME=" + userHome}
	code, out, errs := cliRun(t, env, "feedback", "add", "--notes", "x")
	want := "cmlab: no cmlab home at " + filepath.Join(userHome, ".cm") + " (the default ~/.cm: no --home and no $CMLAB_HOME)\n  fix: pass --home DIR"
	if code != 1 || out != "" || !strings.HasPrefix(errs, want) {
		t.Fatalf("feedback add without a home = %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(userHome, ".cm")); !os.IsNotExist(err) {
		t.Fatalf("~/.cm was created: %v", err)
	}
	typo := filepath.Join(t.TempDir(), "typo")
	code, out, errs = cliRun(t, nil, "status", "--home", typo)
	if code != 1 || out != "" || errs != "cmlab: no cmlab home at "+typo+" (from --home)\n  fix: check the path; 'cmlab serve --home DIR' creates a home and serves it\n" {
		t.Fatalf("status of a missing home = %d %q %q", code, out, errs)
	}
	code, _, errs = cliRun(t, []string{"CMLAB_HOME=" + typo}, "--json", "runs", "list")
	if code != 1 || errs != `{"error":{"code":"NO_HOME","message":"no cmlab home at `+typo+` (from $CMLAB_HOME)","fix":"pass --home DIR or set $CMLAB_HOME to the home you use ('cmlab status --home DIR' shows whether a daemon serves it), or add --init to create a new home here"}}`+"\n" {
		t.Fatalf("--json runs list of a missing home = %d %q", code, errs)
	}
	if _, err := os.Stat(typo); !os.IsNotExist(err) {
		t.Fatalf("the typo'd home was created: %v", err)
	}
	if code, out, errs := cliRun(t, nil, "--init", "--home", typo, "feedback", "add", "--notes", "x"); code != 0 || !strings.HasPrefix(out, "fb_") {
		t.Fatalf("--init feedback add = %d %q %q", code, out, errs)
	}
	if code, out, errs := cliRun(t, nil, "status", "--home", typo); code != 0 || !strings.Contains(out, "health:      ok\n") {
		t.Fatalf("status of the new home = %d %q %q", code, out, errs)
	}
	// The terminal needs the daemon, and says which home has none.
	code, _, errs = cliRun(t, nil, "pty", "status", "--home", typo)
	if code != 1 || !strings.HasPrefix(errs, "cmlab: no daemon serves the home "+typo+" (the terminal lives in the daemon)\n  fix: start it with 'cmlab serve --home "+typo+"'") {
		t.Fatalf("pty without a daemon = %d %q", code, errs)
	}
}

// TestCorruptHomeProcess: a corrupt log exits 3 with the salvage command,
// from status, a Lab command and serve alike.
func TestCorruptHomeProcess(t *testing.T) {
	h, _ := recDamagedHome(t)
	if err := os.Chmod(h.Dir, 0o700); err != nil { // serve checks the home is private first
		t.Fatal(err)
	}
	fix := "  fix: see every damaged place with 'cmlab recover --home " + h.Dir + "', then keep every intact entry with 'cmlab recover --salvage --apply --home " + h.Dir + "' (stop the daemon first)\n"
	for _, args := range [][]string{
		{"status", "--home", h.Dir},
		{"feedback", "poll", "--home", h.Dir},
		{"serve", "--home", h.Dir, "--listen", "127.0.0.1:0"},
		{"wal", "verify", "--home", h.Dir},
	} {
		code, out, errs := cliRun(t, nil, args...)
		if code != exitCorrupt || !strings.HasSuffix(errs, fix) || !strings.Contains(errs, "corrupt") {
			t.Errorf("%v = %d\nstdout %q\nstderr %q", args, code, out, errs)
		}
	}
}

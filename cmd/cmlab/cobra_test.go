package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEveryCommandHasExample: every command of the tree shows an Example
// in its help.
func TestEveryCommandHasExample(t *testing.T) {
	root := newRootCmd(&globalOpts{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.Hidden && c.Name() != "help" && c.Name() != "completion" && !strings.HasPrefix(c.CommandPath(), "cmlab completion ") && strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// TestCobraHabitsProcess: mistyped nested commands and unknown flags exit 2
// and point the way; version and --version print the build.
func TestCobraHabitsProcess(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"runs", "imports", "x"}, []string{"cmlab: unknown command \"imports\" for \"cmlab runs\"\n\nDid you mean this?\n\timport\n  fix: run 'cmlab runs --help'\n"}},
		{[]string{"pty", "exe", "ls"}, []string{"unknown command \"exe\" for \"cmlab pty\"\n\nDid you mean this?\n", "\texec\n"}},
		{[]string{"wal", "verfy"}, []string{"Did you mean this?\n\tverify\n"}},
		{[]string{"statsu"}, []string{"unknown command \"statsu\" for \"cmlab\"", "Did you mean this?\n\tstatus\n"}},
		{[]string{"runs", "list", "--bogus"}, []string{"cmlab: unknown flag: --bogus\n  fix: run 'cmlab runs list --help'\n"}},
		{[]string{"pty", "wait", "x", "--timeout", "30"}, []string{"invalid argument \"30\" for \"--timeout\"", "fix: run 'cmlab pty wait --help'"}},
	} {
		code, out, errs := cliRun(t, nil, c.args...)
		if code != exitUsage || out != "" {
			t.Errorf("%v = %d %q %q", c.args, code, out, errs)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}
	code, out, errs := cliRun(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "cmlab 0.1.0") || !strings.HasSuffix(out, "\n") || errs != "" {
		t.Fatalf("version = %d %q %q", code, out, errs)
	}
	code2, out2, _ := cliRun(t, nil, "--version")
	if code2 != 0 || out2 != out {
		t.Fatalf("--version = %d %q, version %q", code2, out2, out)
	}
	// A group called bare prints its help and succeeds.
	if code, out, _ := cliRun(t, nil, "runs"); code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Fatalf("runs = %d %q", code, out)
	}
}

// TestCompletionProcess: ids complete dynamically from the home (cobra's
// __complete, what the shell scripts call).
func TestCompletionProcess(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	h := filepath.Join(dir, "home")
	for _, r := range []string{"a", "b"} {
		os.MkdirAll(filepath.Join(dir, "output", r), 0o700)
		os.WriteFile(filepath.Join(dir, "output", r, "video.mp4"), []byte("video "+r), 0o600)
	}
	_, ra, _ := cli(t, "--home", h, "--init", "runs", "import", "output/a")
	_, rb, _ := cli(t, "--home", h, "runs", "import", "output/b")
	ra, rb = strings.TrimSpace(ra), strings.TrimSpace(rb)
	code, exp, errs := cli(t, "--home", h, "experiments", "create", "--baseline", ra, "--variant", "B="+rb)
	exp = strings.TrimSpace(exp)
	if code != 0 || !strings.HasPrefix(exp, "exp_") || !strings.HasPrefix(ra, "run_") {
		t.Fatalf("setup: %d %q %q %q %q", code, ra, rb, exp, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "--home", h, "experiments", "get", ""}, exp + "\n:4\n"},
		{[]string{"__complete", "--home", h, "experiments", "create", "--baseline", ""}, ra + "\n" + rb + "\n:4\n"},
		{[]string{"__complete", "--home", h, "wal", "dump", "--type", "pty.block."}, "pty.block.begin\npty.block.end\n:4\n"},
		{[]string{"__complete", "--home", h, "pty", "wait", "--match-type", ""}, "substring\nregex\nprompt\n:4\n"},
	} {
		code, out, _ := cliRun(t, nil, c.args...)
		if code != 0 || out != c.want {
			t.Errorf("%v = %d %q, want %q", c.args[3:], code, out, c.want)
		}
	}
}

// TestFlagNamesHaveOneMeaning: a flag name means one kind of thing across
// the whole tree — --since is a cursor or number to list after (never a
// time), --start/--until are times, --type is an event type, and every
// duration flag is a Go duration.
func TestFlagNamesHaveOneMeaning(t *testing.T) {
	root := newRootCmd(&globalOpts{})
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			where := c.CommandPath() + " --" + f.Name
			u := strings.ToLower(f.Usage)
			switch f.Name {
			case "since":
				seen++
				if strings.Contains(u, "time") || !(strings.Contains(u, "cursor") || strings.Contains(u, "after")) {
					t.Errorf("%s: %q is not a cursor or number to list after", where, f.Usage)
				}
			case "start", "until":
				seen++
				if !strings.Contains(u, "time") {
					t.Errorf("%s: %q is not a time", where, f.Usage)
				}
			case "type":
				seen++
				if !strings.Contains(u, "event type") {
					t.Errorf("%s: %q is not an event type", where, f.Usage)
				}
			}
			if f.Value.Type() == "int" && (strings.Contains(f.Name, "timeout") || strings.Contains(f.Name, "every") || strings.Contains(f.Name, "idle")) {
				t.Errorf("%s: a duration flag must take a Go duration, not %s", where, f.Value.Type())
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if seen < 6 {
		t.Fatalf("walked only %d --since/--start/--until/--type flags: the walk is broken", seen)
	}
}

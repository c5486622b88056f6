package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
)

// recipeLines returns the lines of the fenced block that follows the
// marker "<!-- recipe: NAME -->" in docs/terminal.md.
func recipeLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/terminal.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- recipe: "+name+" -->\n```sh\n")
	if !ok {
		t.Fatalf("docs/terminal.md has no recipe %q", name)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("recipe %q is not closed", name)
	}
	return strings.Split(strings.TrimSuffix(block, "\n"), "\n")
}

// TestPtyRecipeAsWritten (issue 25 §2): the interactive recipe of
// docs/terminal.md (the README's) works copy-pasted: each line, exactly as
// written, run by bash with 'cmlab' on $PATH against a running daemon,
// exits 0 — the recipe failed before (send printed no cursor; the wait
// after it started at the spool's end and missed '>>> '; the closing
// prompt hung on the running python).
func TestPtyRecipeAsWritten(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("the recipe drives python3, which is not installed: %v", err)
	}
	h := home.Home{Dir: privateDir(t)}
	ptyStartDaemon(t, h)
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nexec '" + os.Args[0] + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "cmlab"), []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "CMLAB_HOME=" + h.Dir}
	lines := recipeLines(t, "interactive")
	if len(lines) < 6 {
		t.Fatalf("recipe: %q", lines)
	}
	var last string
	for _, line := range lines {
		cmd := exec.Command("bash", "-e", "-c", line)
		cmd.Env = append(cliCmd(t, nil).Env, env...)
		cmd.Dir = t.TempDir()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s\n  failed after %s: %v\n  stdout: %q\n  stderr: %q", line, time.Since(start), err, out.String(), errb.String())
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%s took %s", line, time.Since(start))
		}
		last = out.String()
	}
	// The last line reads the transcript: the typing where it was typed,
	// no internals.
	if !strings.Contains(last, ">>> print(6*7)\n42\n>>> exit()\n") || strings.Contains(last, "__FWS_PROMPT__") || strings.Contains(last, "eval $'") {
		t.Fatalf("transcript = %q", last)
	}
}

// TestPtyPromptSaysWhatItWaitsFor (issue 25 §2): 'pty prompt' during an
// interactive program says on stderr that it waits for the program to
// exit, and how to end it.
func TestPtyPromptSaysWhatItWaitsFor(t *testing.T) {
	_, a := ptyProcHome(t, "note1")
	pty := func(args ...string) (int, string, string) {
		t.Helper()
		return cliRun(t, nil, append(append([]string{"pty"}, args...), a...)...)
	}
	if code, _, errs := pty("interactive", "cat"); code != 0 {
		t.Fatalf("interactive = %d %q", code, errs)
	}
	// The note names the program in the terminal's foreground: the block
	// begins before the shell has started cat, so wait until it runs.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errs := pty("status", "--json")
		var st struct {
			Foreground string `json:"foreground"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status = %d %q %q", code, out, errs)
		}
		if st.Foreground == "cat" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cat never came to the foreground: %q", out)
		}
		time.Sleep(10 * time.Millisecond) // polling the condition, not waiting a guess
	}
	code, _, errs := pty("prompt", "--timeout", "300ms")
	if code != 1 || !strings.Contains(errs, "cmlab: waiting for the interactive program cat (block blk_") ||
		!strings.Contains(errs, "to exit and the shell prompt to come back; type its exit command with 'cmlab pty send -c note1', or end it with 'cmlab pty end -c note1'") {
		t.Fatalf("prompt during a session = %d %q", code, errs)
	}
	pty("end")
}

// TestPtyCLICursors (issue 25 §1): every CLI call that starts or feeds a
// block prints the resume cursor taken before its input, in text and
// --json; a wait from it sees the whole answer.
func TestPtyCLICursors(t *testing.T) {
	_, a := ptyProcHome(t, "cur1")
	pty := func(args ...string) (int, string, string) {
		t.Helper()
		return cliRun(t, nil, append(append([]string{"pty"}, args...), a...)...)
	}
	cursorRe := regexp.MustCompile(`resume_cursor ([0-9]+)\n$`)
	code, out, errs := pty("exec", "--no-wait", "echo nowait")
	if m := cursorRe.FindStringSubmatch(errs); code != 0 || !strings.HasPrefix(out, "blk_") || m == nil {
		t.Fatalf("exec --no-wait = %d %q %q", code, out, errs)
	}
	pty("prompt", "--from", "input", "--timeout", "20s")
	code, out, _ = pty("exec", "--json", "echo json")
	var ej map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &ej) != nil || ej["output"] != "json\n" || ej["resume_cursor"] == nil {
		t.Fatalf("exec --json = %d %q", code, out)
	}
	pty("interactive", "cat")
	code, out, _ = pty("send", `typed\n`)
	m := cursorRe.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.HasPrefix(out, "resume_cursor ") {
		t.Fatalf("send = %d %q", code, out)
	}
	if code, out, errs := pty("wait", "typed", "--from", m[1], "--timeout", "20s"); code != 0 || !strings.HasPrefix(out, `matched "typed" at `) {
		t.Fatalf("wait from send's cursor = %d %q %q", code, out, errs)
	}
	code, out, _ = pty("send", "--json", `again\n`)
	var sj map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &sj) != nil || sj["resume_cursor"] == nil {
		t.Fatalf("send --json = %d %q", code, out)
	}
	if code, out, errs := pty("wait", "again", "--from", "input", "--timeout", "20s"); code != 0 || !strings.HasPrefix(out, `matched "again" at `) {
		t.Fatalf("wait --from input = %d %q %q", code, out, errs)
	}
	code, out, _ = pty("interrupt", "--json")
	var ij map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &ij) != nil || ij["interrupted"] != true || ij["resume_cursor"] == nil {
		t.Fatalf("interrupt --json = %d %q", code, out)
	}
	if code, out, errs := pty("prompt", "--from", "input", "--timeout", "20s"); code != 0 || !strings.HasPrefix(out, "prompt back (exit ") || strings.Contains(out, "__FWS_PROMPT__") {
		t.Fatalf("prompt = %d %q %q", code, out, errs)
	}
	if code, _, errs := pty("wait", "x", "--from", "soon"); code == 0 || !strings.Contains(errs, `--from wants a cursor`) {
		t.Fatalf("--from soon = %d %q", code, errs)
	}
}

// TestPtyExecCallerCwd (issue 25 §4): 'cmlab pty exec' runs in the
// caller's directory; the conversation's own directory does not change;
// --cwd and --shell-cwd say otherwise.
func TestPtyExecCallerCwd(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	ptyStartDaemon(t, h)
	a := []string{"--home", h.Dir, "-c", "cwd1"}
	run := func(dir string, args ...string) string {
		t.Helper()
		code, out, errs := cliRunIn(t, dir, nil, append(append([]string{"pty", "exec"}, args...), a...)...)
		if code != 0 {
			t.Fatalf("exec %v in %s = %d %q %q", args, dir, code, out, errs)
		}
		return out
	}
	d1, _ := filepath.EvalSymlinks(t.TempDir())
	d2, _ := filepath.EvalSymlinks(t.TempDir())
	os.Mkdir(filepath.Join(d1, "sub"), 0o700)
	if out := run(d1, "pwd"); out != d1+"\n" {
		t.Fatalf("pwd from %s = %q", d1, out)
	}
	if out := run(d2, "pwd"); out != d2+"\n" {
		t.Fatalf("pwd from %s = %q", d2, out)
	}
	if out := run(d1, "--cwd", "sub", "pwd"); out != filepath.Join(d1, "sub")+"\n" {
		t.Fatalf("--cwd sub = %q", out)
	}
	shell := run(d1, "--shell-cwd", "pwd")
	if shell == d1+"\n" || shell == d2+"\n" {
		t.Fatalf("--shell-cwd ran in the caller's directory %q", shell)
	}
	run(d1, "cd "+d1+"/sub")
	if out := run(d2, "--shell-cwd", "pwd"); out != shell {
		t.Fatalf("a cd in a block moved the shell: %q, was %q", out, shell)
	}
	if code, _, errs := cliRunIn(t, d1, nil, append([]string{"pty", "exec", "--cwd", "x", "--shell-cwd", "pwd"}, a...)...); code == 0 || !strings.Contains(errs, "none of the others can be") {
		t.Fatalf("--cwd with --shell-cwd = %d %q", code, errs)
	}
}

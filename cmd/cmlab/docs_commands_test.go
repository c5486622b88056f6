package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docCommand is one "$ …" line of a fenced block of a doc page, with the
// output the page shows after it.
type docCommand struct {
	line   int // in the page, 1-based
	cmd    string
	output []string
}

// docCommands extracts the commands of the fenced blocks of page: lines
// starting with "$ " (a trailing backslash continues onto the next line);
// the lines after one up to the next command or the fence's end are its
// output.
func docCommands(t *testing.T, page string) []docCommand {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docCommand
	in, cont := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```"):
			in, cont = !in, false
		case !in:
		case cont:
			out[len(out)-1].cmd += "\n" + l
			cont = strings.HasSuffix(l, `\`)
		case strings.HasPrefix(l, "$ "):
			out = append(out, docCommand{line: n, cmd: strings.TrimPrefix(l, "$ ")})
			cont = strings.HasSuffix(l, `\`)
		case len(out) > 0:
			out[len(out)-1].output = append(out[len(out)-1].output, l)
		}
	}
	return out
}

// TestDebuggingDocCommands runs every command of docs/debugging.md, in
// order, in a shell whose HOME is a fresh directory (so ~/cmdemo is the
// page's demo home) and whose cmlab is this CLI, and checks each exit
// code: the one 'echo $?' shows after it, else non-zero exactly when the
// page shows an error line ("cmlab: …"). The ids the page shows (its own
// run's) are replaced by those the demo printed here, paired in the order
// the demo prints them. So a page whose demonstration stops demonstrating
// (a sed that matches nothing, a check that no longer diverges) fails.
func TestDebuggingDocCommands(t *testing.T) {
	cmds := docCommands(t, "../../docs/debugging.md")
	if len(cmds) < 20 || !strings.HasPrefix(cmds[1].cmd, "cmlab demo ") {
		t.Fatalf("%d commands found in docs/debugging.md, the second %q: the extraction is broken", len(cmds), cmds[1].cmd)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	dir := t.TempDir()
	// cmlab on PATH is this CLI: a script that execs the test binary (so a
	// job started with & is the CLI's own process, which 'kill %1' ends).
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	shim := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", cliProcEnv, os.Args[0])
	if err := os.WriteFile(filepath.Join(bin, "cmlab"), []byte(shim), 0o700); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "CMLAB_HOME=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+dir, "PATH="+bin+":"+os.Getenv("PATH"))

	// The demo first: its ids replace the page's.
	demo := cmds[1]
	code, demoOut := docShell(t, dir, env, demo.cmd)
	if code != 0 {
		t.Fatalf("docs/debugging.md:%d: %s: exit %d\n%s", demo.line, demo.cmd, code, demoOut)
	}
	idRe := regexp.MustCompile(`\b(run|exp|fb|blk|lab)_[0-9a-f-]{16,}`)
	pageIDs := idRe.FindAllString(strings.Join(demo.output, "\n"), -1)
	ourIDs := idRe.FindAllString(demoOut, -1)
	if len(pageIDs) == 0 || len(pageIDs) != len(ourIDs) {
		t.Fatalf("the demo printed %d ids, the page shows %d: update the page's demo output\n%s", len(ourIDs), len(pageIDs), demoOut)
	}
	var pairs []string
	for i := range pageIDs {
		pairs = append(pairs, pageIDs[i], ourIDs[i])
	}
	ids := strings.NewReplacer(pairs...)

	type check struct {
		c    docCommand
		want int // -1: any non-zero
	}
	var checks []check
	var script strings.Builder
	for i, c := range cmds[2:] {
		i += 2
		if c.cmd == "echo $?" {
			continue // its line is the previous command's expected code
		}
		want := 0
		if i+1 < len(cmds) && cmds[i+1].cmd == "echo $?" && len(cmds[i+1].output) > 0 {
			want, _ = strconv.Atoi(cmds[i+1].output[0])
		} else {
			for _, o := range c.output {
				if strings.HasPrefix(o, "cmlab: ") {
					want = -1
				}
			}
		}
		cmd := ids.Replace(strings.ReplaceAll(c.cmd, "7799", port))
		background := strings.HasSuffix(cmd, "&")
		if background {
			// Its output goes to a file: the transcript ends when the shell does.
			cmd = strings.TrimSuffix(cmd, "&") + " >>\"$HOME/background.log\" 2>&1 &"
		}
		n := len(checks)
		checks = append(checks, check{c, want})
		fmt.Fprintf(&script, "echo '::cmd %d'\n%s\necho \"::rc %d $?\"\n", n, cmd, n)
		if background {
			// A daemon started in the background: wait until it answers.
			fmt.Fprintf(&script, "for i in $(seq 600); do curl -sf 127.0.0.1:%s/api/health >/dev/null && break; sleep 0.05; done\n", port)
		}
	}
	script.WriteString("kill %1 2>/dev/null; wait\n")
	_, out := docShell(t, dir, env, script.String())
	got := map[int]int{}
	text := map[int]string{}
	cur := -1
	cmdRe, rcRe := regexp.MustCompile(`^::cmd (\d+)$`), regexp.MustCompile(`^::rc (\d+) (\d+)$`)
	for _, l := range strings.Split(out, "\n") {
		if m := cmdRe.FindStringSubmatch(l); m != nil {
			cur, _ = strconv.Atoi(m[1])
			continue
		}
		if m := rcRe.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			got[n], _ = strconv.Atoi(m[2])
			continue
		}
		if cur >= 0 {
			text[cur] += l + "\n"
		}
	}
	for n, c := range checks {
		rc, ran := got[n]
		switch {
		case !ran:
			t.Errorf("docs/debugging.md:%d: %s: did not run\n%s", c.c.line, c.c.cmd, text[n])
		case c.want == -1 && rc == 0, c.want >= 0 && rc != c.want:
			t.Errorf("docs/debugging.md:%d: %s: exit %d, the page shows %d (-1: an error)\n%s", c.c.line, c.c.cmd, rc, c.want, text[n])
		}
	}
}

// docShell runs script with bash in dir, its output to a file (a daemon
// left in the background cannot hold it open), within 5 minutes.
func docShell(t *testing.T, dir string, env []string, script string) (int, string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "transcript-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sh := exec.Command("bash", "-c", script)
	sh.Dir, sh.Env, sh.Stdout, sh.Stderr = dir, env, f, f
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sh.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		sh.Process.Kill()
		<-done
		out, _ := os.ReadFile(f.Name())
		t.Fatalf("the page's commands ran over 5 minutes:\n%s", out)
	}
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return sh.ProcessState.ExitCode(), string(out)
}

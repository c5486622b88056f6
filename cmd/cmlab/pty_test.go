package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
)

// ptyStartDaemon serves h on 127.0.0.1 with a terminal manager and
// registers it in state/daemon.json, as 'cmlab serve' does.
func ptyStartDaemon(t *testing.T, h home.Home) {
	t.Helper()
	startTestDaemon(t, h, "lab_ptycli", func(eng *engine.Engine, o *labapi.Options) func() {
		mgr, err := pty.NewManager(eng, pty.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		o.Pty = mgr
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := mgr.Close(ctx); err != nil {
				t.Errorf("terminal manager close: %v", err)
			}
		}
	})
}

// TestPtyCLI drives 'cmlab pty …' against a daemon registered in
// state/daemon.json.
func TestPtyCLI(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(&globalOpts{stdout: &out, stderr: &errb}, append(append([]string{"pty"}, args...), "--home", h.Dir, "-c", "cli1"))
		return code, out.String(), errb.String()
	}
	// Without a daemon the terminal is refused with a clear message.
	if code, _, errs := cli("status"); code == 0 || !strings.Contains(errs, "cmlab serve") {
		t.Fatalf("status without daemon = %d %q", code, errs)
	}
	ptyStartDaemon(t, h)

	if code, out, errs := cli("exec", "echo hi; echo there"); code != 0 || out != "hi\nthere\n" {
		t.Fatalf("exec = %d %q %q", code, out, errs)
	}
	if code, _, errs := cli("exec", "exit_code_three() { return 3; }; exit_code_three"); code != 3 || errs != "" {
		t.Fatalf("failing exec = %d %q", code, errs)
	}
	code, out, _ := cli("status", "--json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st["mode"] != "idle" || st["blocks"] != float64(2) {
		t.Fatalf("status = %d %q", code, out)
	}
	if code, out, _ := cli("blocks"); code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "completed") || !strings.Contains(out, "exit 3") {
		t.Fatalf("blocks = %d %q", code, out)
	}
	if code, out, _ := cli("search", "there"); code != 0 || !strings.Contains(out, "\tthere\n") {
		t.Fatalf("search = %d %q", code, out)
	}
	code, out, _ = cli("interactive", "cat")
	if code != 0 || !strings.HasPrefix(out, "session ses_") {
		t.Fatalf("interactive = %d %q", code, out)
	}
	// The session's resume_cursor: a wait from it cannot miss what cat
	// echoes, however fast (a wait without --from starts at the end).
	from := out[strings.LastIndex(out, " ")+1 : len(out)-1]
	if code, _, errs := cli("exec", "echo no"); code == 0 || !strings.Contains(errs, "busy") {
		t.Fatalf("exec during session = %d %q", code, errs)
	}
	if code, _, errs := cli("send", `hello\n`); code != 0 {
		t.Fatalf("send = %d %q", code, errs)
	}
	if code, out, _ := cli("wait", "hello", "--from", from, "--timeout-ms", "20000"); code != 0 || !strings.HasPrefix(out, `matched "hello"`) {
		t.Fatalf("wait = %d %q", code, out)
	}
	if code, out, _ := cli("end"); code != 0 || !strings.HasPrefix(out, "ended the running block blk_") || !strings.HasSuffix(out, " with Ctrl+C; the shell ended and its slot is free\n") {
		t.Fatalf("end = %d %q", code, out)
	}
	if code, out, _ := cli("read", "--from", "0", "--raw"); code != 0 || !strings.Contains(out, "hi\nthere\n__FWS_PROMPT__ ") || !strings.Contains(out, "hello\n") {
		t.Fatalf("read --raw = %d %q", code, out)
	}
	// The clean transcript (issue 25): no sentinel lines; what send typed
	// ("hello", then cat's copy) and end's Ctrl+C where they were typed.
	if code, out, _ := cli("read", "--from", "0"); code != 0 || out != "hi\nthere\nhello\nhello\n^C\n" {
		t.Fatalf("read = %d %q", code, out)
	}
	if code, out, _ := cli("wait", "never-there", "--timeout-ms", "100"); code != 1 || !strings.HasPrefix(out, "timeout") {
		t.Fatalf("wait timeout = %d %q", code, out)
	}
	if code, out, _ := cli("reset"); code != 0 || !strings.HasPrefix(out, "new shell sh_") {
		t.Fatalf("reset = %d %q", code, out)
	}
	if code, out, _ := cli("exec", "echo after-reset"); code != 0 || out != "after-reset\n" {
		t.Fatalf("exec after reset = %d %q", code, out)
	}
}

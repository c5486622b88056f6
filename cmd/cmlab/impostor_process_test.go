package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

// The impostor of issue 27 finding 1: another local user (uid 65534)
// takes over what a daemon that died uncleanly left in state/daemon.json —
// its pid (as a fork storm would) and its port — and answers like the
// daemon did, hoping the owner's next command sends it the operator token.

// envImpostor switches the test binary into TestHelperImpostor.
const envImpostor = "CMLAB_TEST_IMPOSTOR"

// impostorRequest is one request the impostor received, headers and all.
type impostorRequest struct {
	Method string              `json:"method"`
	Path   string              `json:"path"`
	Header map[string][]string `json:"header"`
}

// TestHelperImpostor is the impostor process. Protocol on stdin/stdout:
// it first fetches the live daemon's GET /api/health (all an outsider can
// learn of it) and prints "captured"; on the line "listen" it listens on
// the daemon's port, answers /api/health with the captured body and
// everything else with {}, and prints "listening <pid>"; when stdin closes
// it prints every request it received as one JSON array and exits.
func TestHelperImpostor(t *testing.T) {
	listen := os.Getenv(envImpostor)
	if listen == "" {
		t.Skip("child process of TestImpostorNeverGetsOperatorToken")
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) { fmt.Fprintln(out, s); out.Flush() }
	var health []byte
	if resp, err := http.Get("http://" + listen + "/api/health"); err == nil {
		health, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	say("captured")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "listen" {
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		say("listen error: " + err.Error())
		os.Exit(2)
	}
	var mu sync.Mutex
	got := []impostorRequest{}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, impostorRequest{r.Method, r.URL.Path, r.Header.Clone()})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/health" && health != nil {
			w.Write(health)
			return
		}
		// What a "success" of each route looks like to the CLI.
		w.Write([]byte(`{"feedbackId":"fb_impostor","ok":true}`))
	}))
	say("listening " + strconv.Itoa(os.Getpid()))
	for in.Scan() {
	}
	mu.Lock()
	b, _ := json.Marshal(got)
	mu.Unlock()
	say(string(b))
	os.Exit(0)
}

// TestImpostorNeverGetsOperatorToken (issue 27 finding 1): a daemon dies
// by SIGKILL and leaves state/daemon.json; a process of uid 65534 then
// holds the pid that file records (the file is rewritten to name it, as a
// fork storm would make it) and listens on its port, answering
// /api/health with what the live daemon served it. The owner's `status`,
// `feedback add` and `pty exec` must never send it the operator token, and
// must say that no daemon runs rather than "succeed" against it.
func TestImpostorNeverGetsOperatorToken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the impostor as uid 65534 (SysProcAttr.Credential); run the tests as root to cover it")
	}
	h := home.Home{Dir: filepath.Join(privateDir(t), "home")}
	if code, _, errs := cliRun(t, nil, "--home", h.Dir, "--init", "feedback", "add", "--notes", "before"); code != 0 {
		t.Fatalf("feedback add = %d %q", code, errs)
	}
	daemon, listen := serveProc(t, "--home", h.Dir, "--quiet")
	tokb, err := os.ReadFile(h.TokenFile())
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokb))

	// The impostor: the test binary copied where uid 65534 may run it.
	base, err := os.MkdirTemp("", "cmlab-impostor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "cmlab.test")
	if b, err := os.ReadFile(os.Args[0]); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	imp := exec.Command(bin, "-test.run=^TestHelperImpostor$", "-test.count=1")
	imp.Dir = base
	imp.Env = append(os.Environ(), envImpostor+"="+listen, "HOME="+base, "CMLAB_HOME=", envAsCmlab+"=")
	imp.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, err := imp.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := imp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var impErr strings.Builder
	imp.Stderr = &impErr
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { imp.Process.Kill(); imp.Wait() })
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 16<<20)
	expect := func(prefix string) string {
		t.Helper()
		if !lines.Scan() || !strings.HasPrefix(lines.Text(), prefix) {
			t.Fatalf("impostor: want %q, got %q (stderr %q)", prefix, lines.Text(), impErr.String())
		}
		return lines.Text()
	}
	expect("captured")

	// The daemon dies uncleanly: state/daemon.json stays.
	before, err := os.ReadFile(h.DaemonFile())
	if err != nil {
		t.Fatal(err)
	}
	daemon.cmd.Process.Signal(syscall.SIGKILL)
	daemon.wait(t, 30*time.Second)
	fmt.Fprintln(stdin, "listen")
	impPid, _ := strconv.Atoi(strings.TrimPrefix(expect("listening "), "listening "))

	// The impostor holds the recorded pid: every field that names the
	// daemon's process now names the impostor's.
	var rec map[string]any
	if err := json.Unmarshal(before, &rec); err != nil {
		t.Fatal(err)
	}
	p, err := steps.ProcessOf(impPid)
	if err != nil {
		t.Fatal(err)
	}
	rec["pid"] = impPid
	if _, ok := rec["pidStart"]; ok {
		rec["pidStart"] = p.Start
	}
	if _, ok := rec["bootId"]; ok {
		rec["bootId"] = p.BootID
	}
	stale, _ := json.Marshal(rec)
	if err := home.WriteFileAtomic(h.DaemonFile(), stale); err != nil {
		t.Fatal(err)
	}

	code, out, errs := cliRun(t, nil, "--home", h.Dir, "status")
	if code != 0 || !strings.Contains(out, "daemon:      not running") || !strings.Contains(out, "stale") {
		t.Errorf("status = %d %q %q; want \"daemon:      not running\" and a note on the stale state/daemon.json", code, out, errs)
	}
	code, out, errs = cliRun(t, nil, "--home", h.Dir, "feedback", "add", "--notes", "after")
	if code != 0 || !strings.HasPrefix(out, "fb_") || out == "fb_impostor\n" || !strings.Contains(errs, "no daemon runs") {
		t.Errorf("feedback add = %d %q %q; want the entry written here, and a note that no daemon runs", code, out, errs)
	}
	code, out, errs = cliRun(t, nil, "--home", h.Dir, "pty", "exec", "-c", "c1", "echo hi")
	if code == 0 || out != "" || !strings.Contains(errs, "no daemon serves the home") || !strings.Contains(errs, "cmlab serve") {
		t.Errorf("pty exec = %d %q %q; want a refusal naming 'cmlab serve'", code, out, errs)
	}
	fb, err := os.ReadFile(h.FeedbackFile())
	if err != nil || !strings.Contains(string(fb), `"notes":"after"`) {
		t.Errorf("feedback.jsonl after feedback add: %v %q", err, fb)
	}

	stdin.Close()
	if !lines.Scan() {
		t.Fatalf("impostor ended without its record: %q", impErr.String())
	}
	var got []impostorRequest
	if err := json.Unmarshal(lines.Bytes(), &got); err != nil {
		t.Fatalf("impostor record %q: %v", lines.Text(), err)
	}
	for _, r := range got {
		for name, vals := range r.Header {
			for _, v := range vals {
				if strings.Contains(v, token) {
					t.Errorf("the impostor received the operator token: %s %s header %s", r.Method, r.Path, name)
				}
			}
		}
	}
	t.Logf("the impostor received %d request(s)", len(got))
}

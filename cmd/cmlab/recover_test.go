package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/steps"
)

func recLastSeq(t *testing.T, h home.Home) uint64 {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	return eng.Log().LastSeq()
}

// recCrashedHome records a mandate whose step a is left executing (the
// world still as planned) and whose step b is left executing with the
// world changed and no expected post: one reset, one review.
func recCrashedHome(t *testing.T, review bool) (home.Home, string) {
	t.Helper()
	h := home.Home{Dir: privateDir(t)}
	work := t.TempDir()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	pre, _ := steps.WorldHash(work, []string{"a.txt"})
	preB, _ := steps.WorldHash(work, []string{"b.txt"})
	planned := []events.PlannedStep{
		{StepID: "a", Tool: "sh", ParamsHash: steps.HashBytes([]byte("a")), PreHash: pre, IdemKey: "ka", World: []string{"a.txt"}, Dir: work},
	}
	if review {
		planned = append(planned, events.PlannedStep{StepID: "b", Tool: "sh", ParamsHash: steps.HashBytes([]byte("b")), PreHash: preB, IdemKey: "kb", World: []string{"b.txt"}, Dir: work})
	}
	evs := []*events.Event{
		events.MustNew("m1", &events.StepPlanned{MandateID: "m1", Steps: planned}),
		events.MustNew("m1", &events.StepExecuting{MandateID: "m1", StepID: "a", IdemKey: "ka", ObservedPreHash: pre}),
	}
	if review {
		evs = append(evs, events.MustNew("m1", &events.StepExecuting{MandateID: "m1", StepID: "b", IdemKey: "kb", ObservedPreHash: preB}))
		if err := os.WriteFile(filepath.Join(work, "b.txt"), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	return h, work
}

func TestRecoverApplyIdempotent(t *testing.T) {
	h, _ := recCrashedHome(t, false)
	code, out, errOut := cli(t, "recover", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, "m1       a     executing  safe_to_retry  current_pre_matches_expected  reset") {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	before := recLastSeq(t, h)
	code, out, errOut = cli(t, "recover", "--apply", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, "applied: 2 event(s)") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	after := recLastSeq(t, h)
	if after != before+2 {
		t.Fatalf("apply appended %d events, want 2 (reset + recovery.applied)", after-before)
	}
	code, out, errOut = cli(t, "recover", "--apply", "--json", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, `"applied": 0`) || !strings.Contains(out, `"status": "pending"`) {
		t.Fatalf("second apply: exit %d\n%s%s", code, out, errOut)
	}
	if got := recLastSeq(t, h); got != after {
		t.Fatalf("second apply appended %d events", got-after)
	}
}

func TestRecoverNeedsReviewExit4(t *testing.T) {
	h, _ := recCrashedHome(t, true)
	code, out, errOut := cli(t, "recover", "--apply", "--home", h.Dir)
	if code != exitNeedReview || !strings.Contains(out, "interrupted_during_execution  needs_review") || !strings.Contains(errOut, "1 step(s) await manual review") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	last := recLastSeq(t, h)
	code, out, _ = cli(t, "recover", "--apply", "--home", h.Dir)
	if code != exitNeedReview || !strings.Contains(out, "explicitly_marked_needs_review") || recLastSeq(t, h) != last {
		t.Fatalf("second: exit %d\n%s", code, out)
	}
	// The operator settles it; then nothing awaits review.
	code, out, errOut = cli(t, "step", "fail", "m1", "b", "--class", "operator", "--msg", "half written", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, "m1/b: failed") {
		t.Fatalf("step fail: %d %s%s", code, out, errOut)
	}
	if code, out, _ = cli(t, "recover", "--home", h.Dir); code != 0 {
		t.Fatalf("after review: exit %d\n%s", code, out)
	}
}

func TestRunMandateCLI(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	work := t.TempDir()
	spec := `{"id":"m1","steps":[
 {"id":"one","argv":["sh","-c","printf 1 >> one.txt; echo did one"],"env":["PATH"],"world":["one.txt"],"expect_post":{"one.txt":"1"}},
 {"id":"two","argv":["sh","-c","printf 2 >> two.txt"],"env":["PATH"],"world":["two.txt"]}]}`
	mp := filepath.Join(work, "m.json")
	if err := os.WriteFile(mp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "run", mp, "--home", h.Dir)
	if code != 0 || !strings.Contains(out, "did one") || strings.Count(out, "completed") != 2 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "run", mp, "--home", h.Dir, "--json")
	if code != 0 || strings.Count(out, `"from_log": true`) != 2 {
		t.Fatalf("rerun: exit %d\n%s%s", code, out, errOut)
	}
	for f, want := range map[string]string{"one.txt": "1", "two.txt": "2"} {
		if b, _ := os.ReadFile(filepath.Join(work, f)); string(b) != want {
			t.Fatalf("%s = %q, want %q", f, b, want)
		}
	}
	// A failing step: exit 1, recorded as failed with its exit code.
	bad := filepath.Join(work, "bad.json")
	os.WriteFile(bad, []byte(`{"id":"m2","steps":[{"id":"x","argv":["sh","-c","echo nope; exit 7"],"env":["PATH"]}]}`), 0o600)
	code, _, errOut = cli(t, "run", bad, "--home", h.Dir)
	if code != 1 || !strings.Contains(errOut, "exited with 7") {
		t.Fatalf("failing run: exit %d %s", code, errOut)
	}
	code, out, _ = cli(t, "step", "list", "m2", "--home", h.Dir, "--json")
	if code != 0 || !strings.Contains(out, `"error_class": "exit_status"`) || !strings.Contains(out, `"exit_code": 7`) {
		t.Fatalf("list: %d %s", code, out)
	}
	// An invalid mandate file changes nothing.
	os.WriteFile(bad, []byte(`{"id":"m3","steps":[]}`), 0o600)
	last := recLastSeq(t, h)
	if code, _, errOut = cli(t, "run", bad, "--home", h.Dir); code != 1 || !strings.Contains(errOut, "invalid mandate") || recLastSeq(t, h) != last {
		t.Fatalf("invalid mandate: exit %d %s", code, errOut)
	}
}

func TestStepCLI(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	work := t.TempDir()
	plan := filepath.Join(work, "plan.json")
	os.WriteFile(plan, []byte(fmt.Sprintf(`{"steps":[{"step_id":"s","tool":"deploy","params_hash":"%s"}]}`, steps.HashBytes([]byte("p")))), 0o600)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"step", "plan", "m1", plan}, 0, "m1: planned"},
		{[]string{"step", "start", "m1", "s", "--world", "out.txt", "--dir", work, "--request-id", "r1"}, 0, "m1/s: executing (idem_key idem_"},
		{[]string{"step", "start", "m1", "s", "--world", "out.txt", "--dir", work, "--request-id", "r1"}, 0, "m1/s: executing"},
		{[]string{"step", "complete", "m1", "s", "--world", "out.txt", "--dir", work}, 2, ""},
		{[]string{"step", "complete", "m1", "s", "--world", "out.txt", "--dir", work, "--exit-code", "0", "--output-digest", steps.HashBytes(nil)}, 0, "m1/s: completed"},
		{[]string{"step", "review", "m1", "s", "--reason", "x"}, 1, ""},
		{[]string{"step", "start", "m1", "nope", "--observed-pre", steps.HashBytes(nil)}, 1, ""},
	} {
		code, out, errOut := cli(t, append(tc.args, "--home", h.Dir)...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Fatalf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
		}
	}
}

// recStartDaemon serves h over 127.0.0.1 and registers it in
// state/daemon.json, as `cmlab serve` does; the engine holds the lock.
func recStartDaemon(t *testing.T, h home.Home) *engine.Engine {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: "127.0.0.1:0", OperatorToken: tok, SessionID: "lab_t"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	addr := strings.TrimPrefix(hs.URL, "http://")
	srv.SetListen(addr)
	sock := &http.Server{Handler: srv.Handler()}
	adv, err := labapi.Advertise(h, labapi.DaemonInfo{Pid: os.Getpid(), Listen: addr, TokenFile: h.TokenFile()}, func(ln net.Listener) { go sock.Serve(ln) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		adv.Withdraw()
		sock.Close()
		hs.Close()
		srv.Close()
		eng.Close()
	})
	return eng
}

// TestRecoverThroughDaemon: with a daemon holding the log, recover never
// takes the lock: the daemon computes and applies the plan.
func TestRecoverThroughDaemon(t *testing.T) {
	h, _ := recCrashedHome(t, false)
	eng := recStartDaemon(t, h)

	code, out, errOut := cli(t, "recover", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, "current_pre_matches_expected  reset") {
		t.Fatalf("plan via daemon: exit %d\n%s%s", code, out, errOut)
	}
	before := eng.Log().LastSeq()
	code, out, errOut = cli(t, "recover", "--apply", "--home", h.Dir)
	if code != 0 || eng.Log().LastSeq() != before+2 {
		t.Fatalf("apply via daemon: exit %d, %d events\n%s%s", code, eng.Log().LastSeq()-before, out, errOut)
	}
	if code, _, errOut = cli(t, "recover", "--apply", "--home", h.Dir); code != 0 || eng.Log().LastSeq() != before+2 {
		t.Fatalf("second apply via daemon: exit %d %s", code, errOut)
	}
	if code, _, errOut = cli(t, "recover", "--salvage", "--apply", "--home", h.Dir); code != 1 || !strings.Contains(errOut, "stop it before --salvage") {
		t.Fatalf("salvage with a daemon: exit %d %s", code, errOut)
	}
}

// TestRunThroughDaemon: with a daemon running, `cmlab run` records every
// transition through its API (the daemon stays the single writer) and
// runs the commands itself.
func TestRunThroughDaemon(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	eng := recStartDaemon(t, h)
	work := t.TempDir()
	mp := filepath.Join(work, "m.json")
	os.WriteFile(mp, []byte(`{"id":"md","steps":[{"id":"a","argv":["sh","-c","printf a >> a.txt"],"env":["PATH"],"world":["a.txt"]},{"id":"b","argv":["sh","-c","printf b >> b.txt"],"env":["PATH"],"world":["b.txt"]}]}`), 0o600)
	before := eng.Log().LastSeq()
	code, out, errOut := cli(t, "run", mp, "--home", h.Dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// plan + 2 × (executing, completed)
	if got := eng.Log().LastSeq() - before; got != 5 {
		t.Fatalf("%d events through the daemon, want 5", got)
	}
	if code, out, _ = cli(t, "run", mp, "--home", h.Dir); code != 0 || strings.Count(out, "log (not run again)") != 2 || eng.Log().LastSeq()-before != 5 {
		t.Fatalf("rerun: exit %d\n%s", code, out)
	}
	for f, want := range map[string]string{"a.txt": "a", "b.txt": "b"} {
		if b, _ := os.ReadFile(filepath.Join(work, f)); string(b) != want {
			t.Fatalf("%s = %q", f, b)
		}
	}
}

// TestRecoverClosesOpenBlock: recover --apply ends a terminal block the
// crash left open with exactly one END (daemon_crashed); a plain recover
// and a second --apply append nothing.
func TestRecoverClosesOpenBlock(t *testing.T) {
	h := home.Home{Dir: privateDir(t)}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	begin := events.MustNew("conv1", &events.PtyBlockBegin{Block: events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "sleep 100", Cwd: "/", Status: "running", OutputPath: "pty/conv1/blocks/blk_1.out"}})
	if _, err := eng.Append(context.Background(), begin); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	last := recLastSeq(t, h)
	if code, _, _ := cli(t, "recover", "--home", h.Dir); code != 0 || recLastSeq(t, h) != last {
		t.Fatal("plain recover appended")
	}
	code, out, errOut := cli(t, "recover", "--apply", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, "closed after the crash: blk_1") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ = cli(t, "recover", "--apply", "--home", h.Dir); code != 0 {
		t.Fatal("second apply failed")
	}
	eng, err = engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ends := 0
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == events.TypePtyBlockEnd {
			e, _ := events.DecodeAs[*events.PtyBlockEnd](ev)
			if e.Block.Reason != "daemon_crashed" || e.Block.Status != "failed" {
				t.Fatalf("END %+v", e.Block)
			}
			ends++
		}
	}
	if ends != 1 {
		t.Fatalf("%d ENDs", ends)
	}
}

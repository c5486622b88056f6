package pty_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
)

// openChild is a crash-test child's engine and terminal manager over the
// home env names (crashchild.Role: a child of the test parent), with o's
// Dir that home; fail reports an error as the child who and exits.
func openChild(t *testing.T, env, parent, who string, o pty.Options) (home.Home, *engine.Engine, *pty.Manager, func(error)) {
	h := home.Home{Dir: crashchild.Role(t, env, parent)}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, who+":", err)
		os.Exit(1)
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		fail(err)
	}
	o.Dir = h.Dir
	mgr, err := pty.NewManager(eng, o)
	if err != nil {
		fail(err)
	}
	return h, eng, mgr, fail
}

// childEnv names the home of TestHelperPtyDaemon.
const childEnv = "CMLAB_PTY_TEST_CHILD"

// TestHelperPtyDaemon is the child of the SIGKILL tests: engine, terminal
// manager and HTTP API over the home childEnv names, listening on
// 127.0.0.1; it writes its address to <home>/child.addr and serves until
// it is killed.
func TestHelperPtyDaemon(t *testing.T) {
	h, eng, mgr, fail := openChild(t, childEnv, "TestDaemonSIGKILL", "child", pty.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: ln.Addr().String(), OperatorToken: testToken, SessionID: "lab_child", Pty: mgr})
	if err != nil {
		fail(err)
	}
	if err := home.WriteFileAtomic(filepath.Join(h.Dir, "child.addr"), []byte(ln.Addr().String())); err != nil {
		fail(err)
	}
	fail(http.Serve(ln, srv.Handler()))
}

// startPtyDaemon starts TestHelperPtyDaemon over h and returns it with
// the address it listens on.
func startPtyDaemon(t *testing.T, h home.Home) (*crashchild.Child, string) {
	t.Helper()
	child := crashchild.Start(t, "TestHelperPtyDaemon", childEnv+"="+h.Dir)
	t.Cleanup(child.Stop)
	addrFile := filepath.Join(h.Dir, "child.addr")
	child.AwaitFile(t, addrFile, 30*time.Second) // written by rename: whole once there
	addr, err := os.ReadFile(addrFile)
	if err != nil {
		t.Fatal(err)
	}
	return child, string(addr)
}

// TestDaemonSIGKILL kills the daemon during a running block and during an
// interactive session. After the restart: exactly one END each (failed,
// daemon_crashed), the spool intact up to the last acknowledged output,
// and a new shell.
func TestDaemonSIGKILL(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	child, addr := startPtyDaemon(t, h)
	remote := &bridge{t: t, home: h, conv: "convblock", srv: nil}
	remote.base = "http://" + addr

	execBody := map[string]any{"cmd": "echo START; sleep 300"}
	code, r := remote.call("POST", "/api/pty/convblock/exec_block", "req-before-crash", execBody)
	if code != 200 {
		t.Fatalf("exec_block = %d %v", code, r)
	}
	blockID := r["block_id"].(string)
	w := remote.post("wait_for", map[string]any{"match": "START\n", "from_cursor": 0, "timeout_ms": 20000})
	if w["matched"] != true {
		t.Fatal(w)
	}
	spoolBlock := remote.spool()
	pid1 := int(num(remote.get("status")["shell_pid"]))

	remote.conv = "convsess"
	ir := remote.post("exec_interactive", map[string]any{"cmd": guess(t)})
	sessBlock := ir["block_id"].(string)
	remote.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	spoolSess := remote.spool()
	pid2 := int(num(remote.get("status")["shell_pid"]))

	child.Kill(t)
	// The orphaned shells lose their terminal; make sure nothing lingers.
	for _, pid := range []int{pid1, pid2} {
		killSessionForTest(pid)
	}

	ctx := context.Background()
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := pty.CloseCrashed(ctx, eng)
	if err != nil {
		t.Fatal(err)
	}
	if len(closed) != 2 || !(closed[0] == blockID && closed[1] == sessBlock) {
		t.Fatalf("CloseCrashed closed %v, want [%s %s]", closed, blockID, sessBlock)
	}
	last := eng.Log().LastSeq()
	if again, err := pty.CloseCrashed(ctx, eng); err != nil || len(again) != 0 || eng.Log().LastSeq() != last {
		t.Fatalf("second CloseCrashed = %v, %v (log %d → %d)", again, err, last, eng.Log().LastSeq())
	}
	b := openBridgeOn(t, h, eng)
	b.conv = "convblock"
	final := b.checkLifecycles()
	for _, id := range []string{blockID, sessBlock} {
		blk := final[id]
		if blk.Status != events.BlockFailed || blk.Reason != pty.ReasonDaemonCrashed {
			t.Fatalf("block %s after restart: %+v", id, blk)
		}
	}
	for conv, want := range map[string][]byte{"convblock": spoolBlock, "convsess": spoolSess} {
		b.conv = conv
		got := b.spool()
		if len(got) < len(want) || string(got[:len(want)]) != string(want) {
			t.Fatalf("%s: spool after restart %q, acknowledged before the kill %q", conv, got, want)
		}
		if st := b.get("status"); st["mode"] != "idle" || st["shell_alive"] != false {
			t.Fatalf("%s: status after restart %v", conv, st)
		}
		b.checkDiskViews(final)
	}
	// A new shell serves the next command; block numbering continues.
	b.conv = "convblock"
	oldShell := final[blockID].ShellID
	blk := b.execWait("echo again")
	if blk["status"] != "completed" || blk["shell_id"] == oldShell || num(blk["seq"]) != 2 {
		t.Fatalf("after restart: %v (old shell %s)", blk, oldShell)
	}
	if pid := int(num(b.get("status")["shell_pid"])); pid == pid1 || pid == 0 {
		t.Fatalf("shell pid %d after restart (was %d)", pid, pid1)
	}
	// A retry of the request made before the crash answers from the log
	// and runs nothing.
	b.barrier()
	before := b.eng.Log().LastSeq()
	code, again := b.call("POST", "/api/pty/convblock/exec_block", "req-before-crash", execBody)
	if code != 200 || again["block_id"] != blockID || fmt.Sprint(again) != fmt.Sprint(r) {
		t.Fatalf("retry after restart = %d %v, original %v", code, again, r)
	}
	b.barrier()
	if n := b.eng.Log().LastSeq() - before; n != 1 { // the barrier itself
		t.Fatalf("retry appended %d events", n-1)
	}
	if n := strings.Count(string(b.spool()), "START\n"); n != 1 {
		t.Fatalf("START printed %d times", n)
	}
}

func killSessionForTest(sid int) {
	for i := 0; i < 100 && countSession(sid) > 0; i++ {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(raw)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) > 3 && f[3] == fmt.Sprint(sid) {
				var pid int
				fmt.Sscan(e.Name(), &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFloodSIGKILL kills the daemon in the middle of a flood through a
// block (pty/doc.go, "What a crash may lose"). After the restart the
// spool is exactly the log's terminal output events in order, their
// offsets contiguous from 0, and every byte a client read before the kill
// (acknowledged output) is there; only output never acknowledged is lost.
func TestFloodSIGKILL(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	deadline := time.Now().Add(30 * time.Second)
	child, addr := startPtyDaemon(t, h)
	remote := &bridge{t: t, home: h, conv: "flood", base: "http://" + addr}
	r := remote.post("exec_block", map[string]any{"cmd": "yes 'flood 0123456789 abcdefghijklmnopqrstuvwxyz'"})
	blockID := r["block_id"].(string)
	pid := int(num(remote.get("status")["shell_pid"]))
	// Read what the daemon acknowledges until 3 MB have been served.
	var acked []byte
	for len(acked) < 3<<20 {
		rd := remote.post("read_spool", map[string]any{"from_cursor": len(acked), "max_bytes": 1 << 20})
		acked = append(acked, rd["data"].(string)...)
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("only %d bytes acknowledged", len(acked))
		}
	}
	child.Kill(t)
	killSessionForTest(pid)

	ctx := context.Background()
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var fromLog []byte
	outputs := 0
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Stream != "flood" {
			continue
		}
		var off int64
		var data []byte
		switch ev.Type {
		case events.TypePtyOutput:
			d, _ := events.DecodeAs[*events.PtyOutput](ev)
			off, data = d.SpoolOffset, d.Data
			outputs++
		case events.TypePtyPrompt:
			d, _ := events.DecodeAs[*events.PtyPrompt](ev)
			off, data = d.SpoolOffset, []byte(d.Line)
		case events.TypePtyTruncated:
			d, _ := events.DecodeAs[*events.PtyTruncated](ev)
			off, data = d.SpoolOffset, []byte(d.Line)
		default:
			continue
		}
		if off != int64(len(fromLog)) {
			t.Fatalf("seq %d (%s): spool_offset %d, the events before end at %d", ev.Seq, ev.Type, off, len(fromLog))
		}
		fromLog = append(fromLog, data...)
	}
	dir, _ := h.PtyDir("flood")
	spool, err := os.ReadFile(filepath.Join(dir, "output.spool"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spool, fromLog) {
		t.Fatalf("output.spool (%d bytes) is not the log's output events (%d bytes)", len(spool), len(fromLog))
	}
	if len(spool) < len(acked) || !bytes.Equal(spool[:len(acked)], acked) {
		t.Fatalf("acknowledged %d bytes, the spool after the restart holds %d and does not start with them", len(acked), len(spool))
	}
	if outputs < 2 {
		t.Fatalf("%d output events: no flood", outputs)
	}
	closed, err := pty.CloseCrashed(ctx, eng)
	if err != nil || len(closed) != 1 || closed[0] != blockID {
		t.Fatalf("CloseCrashed = %v, %v; want [%s]", closed, err, blockID)
	}
	t.Logf("acknowledged %d bytes before the kill; the log holds %d", len(acked), len(spool))
}

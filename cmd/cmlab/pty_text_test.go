package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPtyTextLines: pty status names no "<nil>" session, pty blocks keeps
// its columns aligned past a long status and shows start and duration, and
// pty end says in words what it did (it printed ended=false … shell_ended=true).
func TestPtyTextLines(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"active_block_id": nil}, ""},
		{map[string]any{"active_block_id": "blk_1", "active_session_id": nil}, "running: block blk_1"},
		{map[string]any{"active_block_id": "blk_1", "active_session_id": "ses_1"}, "running: block blk_1 (interactive session ses_1)"},
	} {
		if got := ptyActiveLine(c.m); got != c.want {
			t.Errorf("ptyActiveLine(%v) = %q, want %q", c.m, got, c.want)
		}
	}

	done := map[string]any{"seq": float64(1), "block_id": "blk_a", "status": "completed", "exit_code": float64(0),
		"ts_begin": float64(1764300000000), "ts_end": float64(1764300001500), "cmd": "make"}
	cancelled := map[string]any{"seq": float64(12), "block_id": "blk_b", "status": "cancelled", "reason": "interrupted",
		"exit_code": float64(130), "ts_begin": float64(1764300002000), "ts_end": float64(1764300002250), "cmd": "sleep 9"}
	running := map[string]any{"seq": float64(13), "block_id": "blk_c", "status": "running", "exit_code": nil,
		"ts_begin": float64(1764300003000), "cmd": "tail -f x"}
	want := []string{
		"   1  blk_a                                  completed                exit 0    2025-11-28 03:20:00Z 1.5s      make",
		"  12  blk_b                                  cancelled (interrupted)  exit 130  2025-11-28 03:20:02Z 250ms     sleep 9",
		"  13  blk_c                                  running                  exit -    2025-11-28 03:20:03Z running   tail -f x",
	}
	for i, b := range []map[string]any{done, cancelled, running} {
		if got := ptyBlockLine(b); got != want[i] {
			t.Errorf("ptyBlockLine row %d:\n got %q\nwant %q", i, got, want[i])
		}
	}
	// The command column starts at the same byte in every row.
	at := strings.Index(want[0], "make")
	if strings.Index(want[1], "sleep 9") != at || strings.Index(want[2], "tail -f x") != at {
		t.Fatalf("columns not aligned:\n%s", strings.Join(want, "\n"))
	}

	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"ended": false, "forced": false, "reset": false, "shell_ended": true},
			"nothing was running; the shell ended and its slot is free"},
		{map[string]any{"block_id": "blk_x", "ended": true, "forced": false, "reset": false, "shell_ended": true},
			"ended the running block blk_x with Ctrl+C; the shell ended and its slot is free"},
		{map[string]any{"block_id": "blk_x", "ended": true, "forced": true, "reset": true, "shell_ended": false},
			"killed the running block blk_x (it ignored Ctrl+C); the shell did not come back and was torn down"},
	} {
		if got := ptyEndLine(c.m); got != c.want {
			t.Errorf("ptyEndLine(%v)\n got %q\nwant %q", c.m, got, c.want)
		}
	}
}

// TestPtyWaitWithoutMatchIsUsage: pty wait with no MATCH (and no
// --match-type prompt) is a usage error naming pty prompt, not an API
// answer.
func TestPtyWaitWithoutMatchIsUsage(t *testing.T) {
	h := filepath.Join(t.TempDir(), "home")
	code, out, errs := cli(t, "--home", h, "--init", "pty", "wait")
	if code != exitUsage || out != "" || !strings.Contains(errs, "pty wait needs MATCH") || !strings.Contains(errs, "cmlab pty prompt") {
		t.Fatalf("pty wait without MATCH: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDamagedReplayMark: a replayed home whose state/replayed.json is there
// but cannot be read (cut, not JSON, a directory) still takes no write, and
// every refusal names its fix: an in-process write and a plain serve exit 1
// saying what to type; 'serve --read-only' serves it (the mark has nothing
// to add to that); status says read-only. The damage matrix found the
// first two exiting 1 with the JSON error alone (replayed-marker/truncate,
// symlink-wal and unreadable × serve and write).
func TestDamagedReplayMark(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if code, _, errs := cliRun(t, nil, "--home", src, "--init", "feedback", "add", "--notes", "one"); code != 0 {
		t.Fatalf("feedback add = %d %q", code, errs)
	}
	for _, tc := range []struct {
		name   string
		damage func(mark string) error
	}{
		{"cut", func(mark string) error { return os.Truncate(mark, 5) }},
		{"not JSON", func(mark string) error { return os.WriteFile(mark, []byte{0xfb, 0x00, 0x01}, 0o600) }},
		{"a directory", func(mark string) error {
			if err := os.Remove(mark); err != nil {
				return err
			}
			return os.Mkdir(mark, 0o700)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			into := filepath.Join(t.TempDir(), "replayed")
			if code, _, errs := cliRun(t, nil, "--home", src, "replay", "--to", "1", "--into", into); code != 0 {
				t.Fatalf("replay = %d %q", code, errs)
			}
			mark := filepath.Join(into, "state", "replayed.json")
			if err := tc.damage(mark); err != nil {
				t.Fatal(err)
			}
			before := statusLastSeq(t, into)
			code, out, errs := cliRun(t, nil, "--home", into, "feedback", "add", "--notes", "two")
			if code != 1 || out != "" || !strings.Contains(errs, mark) || !strings.Contains(errs, "  fix: ") ||
				!strings.Contains(errs, "cmlab serve --read-only") || !strings.Contains(errs, "--writable") || strings.Contains(errs, "wrote to") {
				t.Fatalf("write into a replay whose mark is damaged = %d %q %q", code, out, errs)
			}
			if after := statusLastSeq(t, into); after != before {
				t.Fatalf("the refused write appended: last seq %d → %d", before, after)
			}
			code, _, errs = cliRun(t, nil, "--home", into, "serve", "--listen", "127.0.0.1:0", "--quiet")
			if code != 1 || !strings.Contains(errs, mark) || !strings.Contains(errs, "  fix: ") || !strings.Contains(errs, "cmlab serve --read-only") {
				t.Fatalf("serve of a replay whose mark is damaged = %d %q", code, errs)
			}
			_, out, _ = cliRun(t, nil, "status", "--home", into)
			if !strings.Contains(out, "\nmode:        read-only: ") || !strings.Contains(out, "state/replayed.json") {
				t.Fatalf("status of a replay whose mark is damaged:\n%s", out)
			}
			p, _ := serveProc(t, "--home", into, "--read-only", "--quiet")
			code, _, errs = cliRun(t, nil, "--home", into, "feedback", "add", "--notes", "three")
			if code != 1 || !strings.Contains(errs, "FORBIDDEN") || !strings.Contains(errs, "read-only") {
				t.Fatalf("write through serve --read-only = %d %q", code, errs)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("serve --read-only exit %d: %q", code, p.stderr.String())
			}
			if after := statusLastSeq(t, into); after != before {
				t.Fatalf("a refused write appended: last seq %d → %d", before, after)
			}
		})
	}
}

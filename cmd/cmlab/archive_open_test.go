package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsRefuseAHomeWhoseArchiveIsGone: wal verify and status said
// a compacted home's archive was missing, but writes, recover and compact
// opened the home without looking and exited 0 (issue 27's damage matrix,
// archive-dir/delete). Each now exits 3 naming the archive and the fix;
// with the archive back they succeed.
func TestCommandsRefuseAHomeWhoseArchiveIsGone(t *testing.T) {
	h, _ := smallSegmentHome(t)
	arch := filepath.Join(t.TempDir(), "archive")
	if code, out, errOut := cli(t, "compact", "--archive", arch, "--resume-window", "1ms", "--home", h.Dir); code != 0 {
		t.Fatalf("compact: exit %d\n%s%s", code, out, errOut)
	}
	moved := arch + ".away"
	if err := os.Rename(arch, moved); err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{{"feedback", "add", "--notes", "x"}, {"recover"}, {"compact", "--archive", arch, "--resume-window", "1ms"}, {"rebuild"}, {"wal", "verify"}, {"status"}}
	for _, args := range cmds {
		code, out, errOut := cli(t, append(args, "--home", h.Dir)...)
		if code != exitCorrupt || !strings.Contains(out+errOut, "the archive directory is missing") || !strings.Contains(out+errOut, "restore the archive") {
			t.Fatalf("%v with the archive gone: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if err := os.Rename(moved, arch); err != nil {
		t.Fatal(err)
	}
	for _, args := range cmds {
		if code, out, errOut := cli(t, append(args, "--home", h.Dir)...); code != 0 {
			t.Fatalf("%v with the archive back: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

package daemon

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/linktest"
)

// TestDaemonLogRotation: past MaxBytes the log rotates to .1, .2, …, keeps
// Keep files, and never splits a line.
func TestDaemonLogRotation(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	l, err := OpenDaemonLog(h, DaemonLogOptions{MaxBytes: 100, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		fmt.Fprintf(l, "line %02d %s\n", i, strings.Repeat("x", 20)) // 30 bytes
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cur, one, two := read(DaemonLogFile(h)), read(DaemonLogFile(h)+".1"), read(DaemonLogFile(h)+".2")
	if _, err := os.Stat(DaemonLogFile(h) + ".3"); !os.IsNotExist(err) {
		t.Fatalf(".3 exists: %v", err)
	}
	// 3 lines (90 bytes) per file: the last 2 in the current one.
	if !strings.HasPrefix(cur, "line 18 ") || strings.Count(cur, "\n") != 2 ||
		!strings.HasPrefix(one, "line 15 ") || strings.Count(one, "\n") != 3 ||
		!strings.HasPrefix(two, "line 12 ") || strings.Count(two, "\n") != 3 {
		t.Fatalf("current %q\n.1 %q\n.2 %q", cur, one, two)
	}
	// Reopened, it appends.
	l, err = OpenDaemonLog(h, DaemonLogOptions{MaxBytes: 100, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(l, "again\n")
	l.Close()
	if got := read(DaemonLogFile(h)); !strings.HasSuffix(got, "line 19 "+strings.Repeat("x", 20)+"\nagain\n") {
		t.Fatalf("after reopen %q", got)
	}
}

// TestDaemonLogNeverAppendsThroughALink: state/daemon.log replaced by a
// link to a file elsewhere was appended to through the link; and a linked
// state/ took the log before the home's other checks ran. The link is
// removed (its target keeps its bytes) and a linked state/ is refused.
func TestDaemonLogNeverAppendsThroughALink(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	if err := os.MkdirAll(h.StateDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	v := linktest.Plant(t, DaemonLogFile(h), []byte("precious bytes\n"))
	l, err := OpenDaemonLog(h, DaemonLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write([]byte("a line\n")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	v.Unchanged(t)
	linktest.Holds(t, DaemonLogFile(h), []byte("a line\n"))

	h2 := home.Home{Dir: t.TempDir()}
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, h2.StateDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDaemonLog(h2, DaemonLogOptions{}); !errors.Is(err, home.ErrLinkedDir) {
		t.Fatalf("a linked state/: %v, want home.ErrLinkedDir", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Fatalf("wrote %d entries into the linked state/'s target", len(ents))
	}
}

package labapi

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecentProblems: the console's last WARN and ERROR lines of the
// daemon log, text or JSON, from its last bytes only (a line cut by the
// window is left out), at most max of them, oldest first.
func TestRecentProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.log")
	var b strings.Builder
	for i := range 40 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "time=t level=WARN msg=w%02d\n", i)
		case 1:
			fmt.Fprintf(&b, "{\"level\":\"ERROR\",\"msg\":\"e%02d\"}\n", i)
		default:
			fmt.Fprintf(&b, "time=t level=INFO msg=i%02d\n", i)
		}
	}
	log := b.String()
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := recentProblems(path, int64(len(log)), 100)
	if len(got) != 20 || !strings.Contains(got[0], "msg=w00") || !strings.Contains(got[19], `"e37"`) {
		t.Errorf("whole log: %d lines %q", len(got), got)
	}
	if got := recentProblems(path, int64(len(log)), 2); len(got) != 2 || !strings.Contains(got[0], "msg=w36") || !strings.Contains(got[1], `"e37"`) {
		t.Errorf("max 2: %q", got)
	}
	// The window starts inside the WARN line of 36: that line is cut, so
	// only the ERROR line of 37 is whole.
	last := log[strings.Index(log, "time=t level=WARN msg=w36"):]
	if got := recentProblems(path, int64(len(last)-3), 10); len(got) != 1 || !strings.Contains(got[0], `"e37"`) {
		t.Errorf("window inside a line: %q", got)
	}
	if got := recentProblems(filepath.Join(t.TempDir(), "none"), 1024, 10); got == nil || len(got) != 0 {
		t.Errorf("missing log: %#v, want an empty list", got)
	}
}

package labapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/pty"
)

// newSizedPtyLab is newPtyLab with a terminal of cols×rows.
func newSizedPtyLab(t *testing.T, cols, rows int) *testLab {
	t.Helper()
	var mgr *pty.Manager
	tl := newTestLab(t, func(o *Options) {
		m, err := pty.NewManager(o.Engine, pty.Options{Cols: cols, Rows: rows})
		if err != nil {
			t.Fatal(err)
		}
		mgr, o.Pty = m, m
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := mgr.Close(ctx); err != nil {
			t.Errorf("terminal manager close: %v", err)
		}
	})
	return tl
}

// awaitScreen polls the console's screen of a block until ok holds.
func (tl *testLab) awaitScreen(conv, block string, ok func(html string) bool) consoleScreenResult {
	tl.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var s consoleScreenResult
	for {
		r := tl.do("GET", "/api/console/pty/"+conv+"/blocks/"+block+"/screen", "")
		if r.status != 200 {
			tl.t.Fatalf("screen: %d %s", r.status, r.body)
		}
		if err := json.Unmarshal(r.body, &s); err != nil {
			tl.t.Fatal(err)
		}
		if ok(s.HTML) {
			return s
		}
		if time.Now().After(deadline) {
			tl.t.Fatalf("the screen never showed what was awaited: %q", s.HTML)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsoleScreenAtSessionSize: a full-screen block's screen is rendered
// at the size of the pty its shell ran in (pty.session.started's cols and
// rows in the log), not a fixed one: on a 50×12 terminal a line of 100
// characters wraps at 50, and only the last 12 rows are on the screen.
func TestConsoleScreenAtSessionSize(t *testing.T) {
	tl := newSizedPtyLab(t, 50, 12)
	r := tl.do("POST", "/api/pty/sized/exec_interactive", `{"cmd":"for i in $(seq 1 30); do echo row-$i; done; printf 'x%.0s' $(seq 1 100); echo; echo done-printing; cat"}`)
	if r.status != 200 {
		t.Fatalf("exec_interactive: %d %s", r.status, r.body)
	}
	block, _ := r.json(t)["block_id"].(string)
	s := tl.awaitScreen("sized", block, func(h string) bool { return strings.Contains(h, "done-printing") })
	x50, x51 := strings.Repeat("x", 50), strings.Repeat("x", 51)
	if !strings.Contains(s.HTML, x50) || strings.Contains(s.HTML, x51) {
		t.Errorf("100 x's on a 50-column screen do not wrap at 50: %q", s.HTML)
	}
	// 30 rows, two of x's and the last line: rows 1..21 scrolled off.
	if !strings.Contains(s.HTML, "row-30") || strings.Contains(s.HTML, "row-10") || strings.Contains(s.HTML, "row-21\n") {
		t.Errorf("a 12-row screen shows rows that scrolled off: %q", s.HTML)
	}
	if s.Cols != 50 || s.Rows != 12 {
		t.Errorf("screen size %d×%d, want 50×12", s.Cols, s.Rows)
	}
	tl.do("POST", "/api/pty/sized/interrupt", `{}`)
}

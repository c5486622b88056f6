package console

import (
	"strings"
	"testing"
	"time"
)

// TestRenderOutput: colours become classes, a carriage return redraws the
// line (a progress bar shows its last state), and markup in the output is
// text.
func TestRenderOutput(t *testing.T) {
	got := RenderOutput([]byte("\x1b[31mred\x1b[0m <b>x</b>\n10%\r50%\r100%\n"))
	for _, want := range []string{`<span class="term-fg31">red</span>`, "&lt;b&gt;x&lt;&#47;b&gt;", "100%"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "10%") || strings.Contains(got, "<b>") {
		t.Errorf("%q shows overwritten progress or markup", got)
	}
}

// TestRenderScreen: a full-screen program's screen (cursor addressing,
// clear screen) is what it left, a query in the output does not block,
// and markup is text.
func TestRenderScreen(t *testing.T) {
	done := make(chan string, 1)
	go func() {
		done <- RenderScreen([]byte("garbage\x1b[2J\x1b[H\x1b[6n\x1b[c\x1b[3;5Hhello <i>\x1b[1;1Htop"), 40, 10)
	}()
	var got string
	select {
	case got = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RenderScreen blocked on a query")
	}
	if strings.Contains(got, "garbage") || !strings.Contains(got, "top") || !strings.Contains(got, "    hello &lt;i&gt;") || strings.Contains(got, "<i>") {
		t.Fatalf("screen %q", got)
	}
}

// TestRenderScreenLineEnds: the spool stores a line end as "\n"; the
// screen shows the next line at its start, as the terminal did ("\r\n"),
// not a staircase.
func TestRenderScreenLineEnds(t *testing.T) {
	if got := RenderScreen([]byte("one\ntwo\nthree"), 20, 5); got != "one\ntwo\nthree" {
		t.Fatalf("screen %q", got)
	}
}

package mcp

import (
	"context"
	"testing"
)

// TestDestructiveAnnotations: every terminal tool that acts is annotated
// destructive — pty_exec runs arbitrary commands, pty_send types them —
// and no read is.
func TestDestructiveAnnotations(t *testing.T) {
	cs := connect(t, InProcess(&fakeDaemon{}, "tok"))
	want := map[string]bool{"pty_exec": true, "pty_exec_interactive": true, "pty_send": true, "pty_expect_send": true, "pty_end_session": true, "pty_reset": true,
		"pty_exec_wait": true, "pty_interrupt": true}
	seen := 0
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		a := tool.Annotations
		if a == nil {
			t.Errorf("%s: no annotations", tool.Name)
			continue
		}
		destructive := a.DestructiveHint != nil && *a.DestructiveHint
		if destructive != want[tool.Name] {
			t.Errorf("%s: destructive=%v (read-only %v)", tool.Name, destructive, a.ReadOnlyHint)
		}
		if want[tool.Name] {
			seen++
		}
	}
	if seen != len(want) {
		t.Fatalf("%d of %d acting terminal tools listed", seen, len(want))
	}
}

// TestOpenWorldHints (issue 25 §5): the tools that run or type commands
// say openWorldHint true (what a command touches is outside cmlab); no
// other tool does.
func TestOpenWorldHints(t *testing.T) {
	cs := connect(t, InProcess(&fakeDaemon{}, "tok"))
	want := map[string]bool{"pty_exec": true, "pty_exec_interactive": true, "pty_exec_wait": true, "pty_send": true, "pty_expect_send": true, "pty_interrupt": true}
	seen := 0
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		a := tool.Annotations
		if a == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: no openWorldHint", tool.Name)
			continue
		}
		if *a.OpenWorldHint != want[tool.Name] {
			t.Errorf("%s: openWorldHint=%v", tool.Name, *a.OpenWorldHint)
		}
		if want[tool.Name] {
			seen++
		}
	}
	if seen != len(want) {
		t.Fatalf("%d of %d command tools listed", seen, len(want))
	}
}

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
	want := map[string]bool{"pty_exec": true, "pty_exec_interactive": true, "pty_send": true, "pty_expect_send": true, "pty_end_session": true, "pty_reset": true}
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

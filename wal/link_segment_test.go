package wal

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/internal/linktest"
)

// TestLinkedSegmentNeverWrittenThrough: the last segment replaced by a
// link to a copy elsewhere was appended to through the link (the damage
// matrix's segment/symlink-elsewhere with serve and an in-process write).
// Open refuses the log, naming the link and its fix, and neither the link
// nor its target changes.
func TestLinkedSegmentNeverWrittenThrough(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), events.MustNew("lab_x", &events.LabSessionStarted{SessionID: "lab_x", Version: "t", Pid: 1})); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	last := filepath.Join(dir, segs[len(segs)-1].Name)
	v := linktest.MoveAway(t, last)
	l, err = Open(Options{Dir: dir})
	if err == nil {
		l.Append(context.Background(), events.MustNew("lab_x", &events.LabSessionStarted{SessionID: "lab_x", Version: "t", Pid: 2}))
		l.Close()
		t.Error("opened a log whose last segment is a link")
	} else if !strings.Contains(err.Error(), segs[len(segs)-1].Name+" is a symbolic link") || !strings.Contains(err.Error(), "fix: ") {
		t.Errorf("the refusal names neither the link nor its fix: %v", err)
	}
	v.Unchanged(t)
	linktest.StillLink(t, last)
}

package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// TestSymlinkedViewNeverWrittenThrough (issue 27 damage matrix): a view
// replaced by a symlink — to a file elsewhere, or into wal/ — was opened,
// truncated and written through the link: with the link on the last log
// segment, opening the home cut acknowledged events out of the log. A view
// that is not a regular file is removed (the link, never its target) and
// rebuilt from the log; the target keeps every byte.
func TestSymlinkedViewNeverWrittenThrough(t *testing.T) {
	out := func(id string) *events.Event {
		return events.MustNew("c1", &events.PtyOutput{Data: []byte("output " + id + "\n")})
	}
	for _, tc := range []struct {
		view string
		ev   func(id string) *events.Event
	}{{projections.FeedbackView, feedbackEvent}, {"pty/c1/output.spool", out}} {
		view := tc.view
		t.Run(view, func(t *testing.T) {
			h := home.Home{Dir: t.TempDir()}
			e := openTest(t, h)
			mustAppend(t, e, tc.ev("fb_1"), tc.ev("fb_2"))
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			want := readView(t, h, view)
			victim := filepath.Join(t.TempDir(), "victim")
			orig := bytes.Repeat([]byte("precious bytes\n"), 100)
			if err := os.WriteFile(victim, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			p := viewPath(h, view)
			os.Remove(p)
			if err := os.Symlink(victim, p); err != nil {
				t.Fatal(err)
			}
			e = openTest(t, h)
			mustAppend(t, e, tc.ev("fb_3"))
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(victim); !bytes.Equal(got, orig) {
				t.Fatalf("the symlink's target was written through: %d bytes, want %d unchanged", len(got), len(orig))
			}
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s is not a regular file again: %v %v", view, fi, err)
			}
			if got := readView(t, h, view); !bytes.HasPrefix(got, want) {
				t.Fatalf("%s:\n%s\nwant it to start with\n%s", view, got, want)
			}
			rebuildAndCompare(t, h)
		})
	}
}

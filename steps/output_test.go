package steps

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/linktest"
)

// TestStepOutputNeverWrittenThroughALink: a step's output file replaced by
// a link to a file elsewhere was truncated and written through the link;
// a linked mandate directory took the file into the link's target. The
// file's link is removed (never its target) and a linked directory is
// refused.
func TestStepOutputNeverWrittenThroughALink(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	p := OutputFile(h, "m1", "s1")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	v := linktest.Plant(t, p, []byte("precious bytes\n"))
	w, closeOut, err := CaptureOutput(h)("m1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "step output\n")
	closeOut()
	v.Unchanged(t)
	linktest.Holds(t, p, []byte("step output\n"))

	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Dir(OutputFile(h, "m2", "s1"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CaptureOutput(h)("m2", "s1"); !errors.Is(err, home.ErrLinkedDir) {
		t.Fatalf("a linked mandate directory: %v, want home.ErrLinkedDir", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Fatalf("wrote %d entries into the linked directory's target", len(ents))
	}
}

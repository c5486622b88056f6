package recovery

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/linktest"
)

// TestResumeLogNeverAppendsThroughALink: state/resume/<mandate>.log
// replaced by a link to a file elsewhere was appended to through the
// link. The link is removed (its target keeps its bytes) and the log
// starts anew in its place.
func TestResumeLogNeverAppendsThroughALink(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	p, err := ResumeLogPath(h, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	v := linktest.Plant(t, p, []byte("precious bytes\n"))
	w, closeOut, err := ResumeOutputFile(h)("m1")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "resumed\n")
	closeOut()
	v.Unchanged(t)
	linktest.Holds(t, p, []byte("resumed\n"))
}

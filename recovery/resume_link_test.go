package recovery

import (
	"io"
	"os"
	"path/filepath"
	"strings"
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

// TestResumeLogThatCannotBeOpenedNamesItsFix: a resumed mandate's output
// file that cannot be opened (here a directory in its place) stops the
// resume, which the daemon logs and tries again at every start; the
// error it logs names the file and the fix, not the system's error alone.
func TestResumeLogThatCannotBeOpenedNamesItsFix(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	p, err := ResumeLogPath(h, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err = ResumeOutputFile(h)("m1")
	if err == nil || !strings.Contains(err.Error(), "state/resume/m1.log") || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("ResumeOutputFile with a directory in its place: %v; want the file and the fix named", err)
	}
}

package recovery

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/home"
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
	victim := filepath.Join(t.TempDir(), "victim")
	orig := []byte("precious bytes\n")
	if err := os.WriteFile(victim, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	w, closeOut, err := ResumeOutputFile(h)("m1")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "resumed\n")
	closeOut()
	if got, _ := os.ReadFile(victim); string(got) != string(orig) {
		t.Fatalf("the link's target was appended to: %q", got)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "resumed\n" {
		t.Fatalf("%s = %q, %v", p, got, err)
	}
}

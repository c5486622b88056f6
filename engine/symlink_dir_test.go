package engine

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// TestSymlinkedDirectoryNeverWrittenThrough: a directory of the home
// replaced by a symlink to a directory elsewhere was followed: opening the
// home rebuilt feedback/feedback.jsonl through a linked feedback/ and
// overwrote the file of that name in the link's target. A home whose
// directories are not real directories is refused for writing, naming the
// link and its fix, and nothing outside the home is written.
func TestSymlinkedDirectoryNeverWrittenThrough(t *testing.T) {
	tpl := t.TempDir()
	h := home.Home{Dir: tpl}
	e := openTest(t, h)
	conv := "conv_1"
	blk := events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "echo hi", Cwd: "/", Status: events.BlockRunning, OutputPath: "blocks/blk_1.out"}
	mustAppend(t, e, feedbackEvent("fb_1"),
		events.MustNew("lab_x", &events.LabSessionStarted{SessionID: "lab_x", Version: "t", Pid: 1}),
		events.MustNew(conv, &events.PtyBlockBegin{Block: blk}),
		events.MustNew(conv, &events.PtyOutput{BlockID: "blk_1", Data: []byte("hi\n")}))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"wal", "state", "quarantine", "feedback", "lab", "lab/sessions", "lab/sessions/lab_x",
		"lab/exports", "steps", "pty", "pty/conv_1", "pty/conv_1/blocks"} {
		t.Run(strings.ReplaceAll(d, "/", "_"), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "home")
			copyDir(t, tpl, dir)
			p := filepath.Join(dir, filepath.FromSlash(d))
			if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
				t.Fatalf("the template home has no directory %s: %v", d, err)
			}
			// Elsewhere: the same tree, every file's bytes someone else's.
			elsewhere := filepath.Join(root, "elsewhere")
			copyDir(t, p, elsewhere)
			filepath.WalkDir(elsewhere, func(q string, de fs.DirEntry, err error) error {
				if err == nil && de.Type().IsRegular() {
					os.WriteFile(q, []byte("precious bytes of "+de.Name()+"\n"), 0o600)
				}
				return nil
			})
			before := treeBytes(t, elsewhere)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, p); err != nil {
				t.Fatal(err)
			}
			e, err := Open(context.Background(), Options{Home: home.Home{Dir: dir}, Now: fixedClock()})
			if err == nil {
				_, aerr := e.Append(context.Background(), feedbackEvent("fb_2"))
				e.Close()
				t.Errorf("opened a home whose %s is a symlink (append: %v)", d, aerr)
			} else {
				msg := err.Error()
				if !strings.Contains(msg, d+" is a symbolic link") || !strings.Contains(msg, "fix:") {
					t.Errorf("the refusal does not name %s as a link with its fix: %v", d, err)
				}
			}
			if after := treeBytes(t, elsewhere); !maps.Equal(before, after) {
				t.Fatalf("the link's target was written through: %d files before, %d after", len(before), len(after))
			}
			if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the link itself was replaced or removed: %v %v", fi, err)
			}
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case de.IsDir():
			return os.MkdirAll(dst, 0o700)
		case de.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o600)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// treeBytes maps every entry below dir (not following links) to its bytes
// ("dir" for a directory).
func treeBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			m[p] = "error " + err.Error()
			return nil
		}
		if de.IsDir() {
			m[p] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			m[p] = "error " + err.Error()
		} else {
			m[p] = string(b)
		}
		return nil
	})
	return m
}

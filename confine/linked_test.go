package confine

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenLinked: a symlink to a file inside the folder (or inside an
// allowed base) is followed and the target's bytes are read; one pointing
// outside is ErrLinkOutside; a chain through a directory symlink out of the
// folder is refused as well.
func TestOpenLinked(t *testing.T) {
	tmp := t.TempDir()
	base := filepath.Join(tmp, "root")
	run := filepath.Join(base, "run")
	other := filepath.Join(base, "shared")
	outside := filepath.Join(tmp, "outside")
	for _, d := range []string{filepath.Join(run, "renders"), other, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(run, "renders", "final.mp4"), "FINAL")
	write(filepath.Join(other, "script.json"), "SHARED")
	write(filepath.Join(outside, "secret"), "SECRET")
	links := map[string]string{
		"video.mp4":           "renders/final.mp4",
		"script.json":         filepath.Join(other, "script.json"),
		"sync-report.json":    filepath.Join(outside, "secret"),
		"score.json":          "../../outside/secret",
		"caption-report.json": "missing.json",
	}
	for n, target := range links {
		if err := os.Symlink(target, filepath.Join(run, n)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string, bases []string) (string, error) {
		f, err := OpenLinked(run, name, bases)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		return string(b), err
	}
	if got, err := read("video.mp4", nil); err != nil || got != "FINAL" {
		t.Fatalf("link inside the folder: %q %v", got, err)
	}
	if _, err := read("script.json", nil); !errors.Is(err, ErrLinkOutside) {
		t.Fatalf("link to a sibling without the base: %v", err)
	}
	if got, err := read("script.json", []string{base}); err != nil || got != "SHARED" {
		t.Fatalf("link inside an allowed base: %q %v", got, err)
	}
	for _, n := range []string{"sync-report.json", "score.json"} {
		if got, err := read(n, []string{base}); !errors.Is(err, ErrLinkOutside) || got != "" {
			t.Fatalf("%s: link outside: %q %v", n, got, err)
		}
	}
	if _, err := read("caption-report.json", []string{base}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dangling link: %v", err)
	}
	// Open itself still follows nothing.
	if _, err := Open(run, "video.mp4"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Open followed a link: %v", err)
	}
	// The caller's rights are checked on the resolved file.
	if err := os.Chmod(filepath.Join(run, "renders", "final.mp4"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		if _, err := OpenLinkedFor(run, "video.mp4", nil, User{UID: os.Getuid() + 1}); !errors.Is(err, ErrAccess) {
			t.Fatalf("another uid read a 0600 target: %v", err)
		}
	}
	if b, err := ReadFileLinked(run, "video.mp4", nil, 1<<10, &User{UID: os.Getuid()}); err != nil || string(b) != "FINAL" {
		t.Fatalf("owner read: %q %v", b, err)
	}
}

package labapi

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestDiscoverHugeRunDir: a process that can write in a run folder can
// fill it with entries, and the folder is read on every GET of the run,
// every feedback on it and every video asked for. Reading it must not
// cost memory in proportion to the entries: 50,000 of them, discover
// allocates under 1 MiB in all (before, the whole listing was read into
// memory at once: about 6 MB here, and gigabytes for a few million names
// read by concurrent requests), and still finds the first .mp4 by name.
func TestDiscoverHugeRunDir(t *testing.T) {
	dir := t.TempDir()
	for i := range 50_000 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("junk-%06d-of-a-filled-folder.txt", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, n := range []string{"zz.MP4", "b.mp4", "c.mp4", "script.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "a.mp4"), 0o755); err != nil { // a directory: skipped
		t.Fatal(err)
	}
	discover(dir, dir, nil) // warm: the first call's one-time costs
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := discover(dir, dir, nil)
	runtime.ReadMemStats(&after)
	if d.video != filepath.Join(dir, "b.mp4") || d.script != filepath.Join(dir, "script.json") {
		t.Fatalf("discover found video %q script %q", d.video, d.script)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("discover of a folder of 50,004 entries allocated %d bytes, want under 1 MiB", n)
	}
}

// TestScanRunDirKeepsSmallestMP4s: the names the scan keeps are the
// fixed names present and the smallest .mp4 names, in order, however the
// directory lists them.
func TestScanRunDirKeepsSmallestMP4s(t *testing.T) {
	dir := t.TempDir()
	for i := range mp4Keep + 10 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("v%03d.mp4", mp4Keep+10-i)), nil, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "score.json"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "other.json"), nil, 0o644)
	present, mp4s, err := scanRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mp4s) != mp4Keep || mp4s[0] != "v001.mp4" || mp4s[mp4Keep-1] != fmt.Sprintf("v%03d.mp4", mp4Keep) {
		t.Fatalf("mp4s = %d names, %v", len(mp4s), mp4s)
	}
	if !present["score.json"] || present["other.json"] || len(present) != 1 {
		t.Fatalf("present = %v", present)
	}
}

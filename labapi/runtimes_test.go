package labapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunFingerprintMtimePrecision (issue 28 A3): content-machine compares
// a run's fingerprint with `!==` on Node's stat mtimeMs, a double with the
// sub-millisecond part (sec*1e3 + nsec/1e6). runs.jsonl must carry that
// very number, as JSON.stringify writes it, or their server re-imports an
// unchanged run as a new one. Node 22 prints 1700000000123.4568 for a file
// touched at 1700000000.123456789. Re-importing the unchanged run here
// answers the same run id.
func TestRunFingerprintMtimePrecision(t *testing.T) {
	tl := newTestLab(t)
	dir := tl.mkRun("mtime", map[string]string{"video.mp4": "v", "script.json": `{"title":"t"}`})
	at := time.Unix(1700000000, 123456789)
	if err := os.Chtimes(filepath.Join(dir, "video.mp4"), at, at); err != nil {
		t.Fatal(err)
	}
	exact := time.Unix(1700000001, 0) // whole seconds print as an integer, as Node's
	if err := os.Chtimes(filepath.Join(dir, "script.json"), exact, exact); err != nil {
		t.Fatal(err)
	}
	id := tl.importRun(dir)
	b, err := os.ReadFile(tl.home.RunsFile())
	if err != nil {
		t.Fatal(err)
	}
	line := string(b)
	for _, want := range []string{`"video":{"path":"` + filepath.Join(dir, "video.mp4") + `","sizeBytes":1,"mtimeMs":1700000000123.4568}`,
		`"script":{"path":"` + filepath.Join(dir, "script.json") + `","sizeBytes":13,"mtimeMs":1700000001000}`} {
		if !strings.Contains(line, want) {
			t.Fatalf("runs.jsonl lacks %s:\n%s", want, line)
		}
	}
	if again := tl.importRun(dir); again != id {
		t.Fatalf("unchanged run re-imported as %s (was %s)", again, id)
	}
	// A change below the millisecond is a change, as for their server.
	at2 := time.Unix(1700000000, 123756789)
	if err := os.Chtimes(filepath.Join(dir, "video.mp4"), at2, at2); err != nil {
		t.Fatal(err)
	}
	if again := tl.importRun(dir); again == id {
		t.Fatalf("a sub-millisecond mtime change was not seen")
	}
}

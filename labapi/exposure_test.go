package labapi

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exportsBytes is the total size of the files under lab/exports/.
func exportsBytes(t *testing.T, dir string) (int64, int) {
	t.Helper()
	var n int64
	files := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			n += fi.Size()
			files++
		}
		return nil
	})
	return n, files
}

// TestExportBudget (issue 27 finding 5): exports stop at the budget of
// lab/exports/ with 507 INSUFFICIENT_STORAGE naming the fix, write nothing
// when refused, and an export that overwrites an existing file counts only
// once.
func TestExportBudget(t *testing.T) {
	tl := newTestLab(t, func(o *Options) { o.ExportBudget = 4096 })
	for i := 0; i < 5; i++ {
		tl.do("POST", "/api/feedback", fmt.Sprintf(`{"notes":"entry %d %s"}`, i, strings.Repeat("x", 100)))
	}
	var ok, refused int
	var last resp
	for i := 0; i < 40 && refused == 0; i++ {
		last = tl.do("POST", "/api/export", fmt.Sprintf(`{"sessionId":"lab_test","path":"e%d.json"}`, i))
		switch last.status {
		case 200:
			ok++
		case 507:
			refused++
		default:
			t.Fatalf("export %d: %d %s", i, last.status, last.body)
		}
	}
	used, files := exportsBytes(t, tl.home.ExportsDir())
	if refused != 1 || ok == 0 || files != ok || used > 4096 {
		t.Fatalf("%d exports written (%d files, %d bytes), %d refused; want some written, within 4096 bytes, then a refusal", ok, files, used, refused)
	}
	if last.code() != CodeInsufficientStorage || !strings.Contains(string(last.body), "Remove exports you no longer need from lab/exports/") || !strings.Contains(string(last.body), "--export-budget") {
		t.Fatalf("refusal: %s", last.body)
	}
	// A refused export wrote nothing; overwriting an existing one is allowed.
	if r := tl.do("POST", "/api/export", `{"sessionId":"lab_test","path":"e0.json"}`); r.status != 200 {
		t.Fatalf("overwrite within the budget: %d %s", r.status, r.body)
	}
	if u2, f2 := exportsBytes(t, tl.home.ExportsDir()); f2 != files || u2 != used {
		t.Fatalf("after the overwrite: %d files %d bytes, want %d %d", f2, u2, files, used)
	}
}

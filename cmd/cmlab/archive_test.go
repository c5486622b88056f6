package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/wal"
)

// walSegmentNames lists the segment files (20-digit names) of dir.
func walSegmentNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		if len(d.Name()) == 20 && strings.Trim(d.Name(), "0123456789") == "" {
			out = append(out, d.Name())
		}
	}
	return out
}

// dumpCount is how many events 'wal dump --from 1' prints of home h.
func dumpCount(t *testing.T, h string, extra ...string) (int, string) {
	t.Helper()
	code, out, errs := walCLI(t, append([]string{"--home", h, "wal", "dump", "--from", "1"}, extra...)...)
	if code != 0 {
		return -1, errs
	}
	return strings.Count(out, "\n"), errs
}

// TestCompactCLIArchiveThatIsTheLogIsRefused (issue 27 finding 2):
// `compact --archive DIR` with DIR a symlink to wal/, or with the home
// given through a symlink and DIR its real wal/, said "removed N
// segment(s)" and deleted the history. Both are refused naming why,
// every segment stays and every event reads.
func TestCompactCLIArchiveThatIsTheLogIsRefused(t *testing.T) {
	h := compactHome(t)
	before := walSegmentNames(t, filepath.Join(h, "wal"))
	links := t.TempDir()
	walLink := filepath.Join(links, "wal-link")
	homeLink := filepath.Join(links, "home-link")
	if err := os.Symlink(filepath.Join(h, "wal"), walLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h, homeLink); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--home", h, "compact", "--archive", walLink},
		{"--home", homeLink, "compact", "--archive", filepath.Join(h, "wal")},
		{"--home", h, "compact", "--archive", homeLink},
	} {
		code, out, errs := walCLI(t, args...)
		if code == 0 || !strings.Contains(errs, "bad archive directory") || strings.Contains(out, "removed") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
		if got := walSegmentNames(t, filepath.Join(h, "wal")); !slices.Equal(got, before) {
			t.Fatalf("%v: the log holds %v, want %v", args, got, before)
		}
		if n, errs := dumpCount(t, h); n != 120 {
			t.Fatalf("%v: %d events read after the refused compaction: %s", args, n, errs)
		}
	}
	if code, out, errs := walCLI(t, "--home", h, "rebuild", "--check"); code != 0 {
		t.Fatalf("rebuild --check: exit %d\n%s%s", code, out, errs)
	}
}

// TestWalVerifyAndStatusCheckTheArchive (issue 27 item 11, findings 2
// and 7): with the whole archive directory gone, or one archived segment
// missing, or one byte flipped in one, `wal verify` and `status` said ok.
// They exit 3 naming the file and the fix; put back, both are ok again.
func TestWalVerifyAndStatusCheckTheArchive(t *testing.T) {
	h := compactHome(t)
	archive := filepath.Join(t.TempDir(), "archive")
	if code, _, errs := walCLI(t, "--home", h, "compact", "--archive", archive); code != 0 {
		t.Fatal(errs)
	}
	segs := walSegmentNames(t, archive)
	if len(segs) < 3 {
		t.Fatalf("archive holds %v", segs)
	}
	if code, out, errs := walCLI(t, "--home", h, "wal", "verify"); code != 0 || !strings.Contains(out, fmt.Sprintf("archive: 1 range(s), %d segment(s)", len(segs))) {
		t.Fatalf("wal verify: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := walCLI(t, "--home", h, "status"); code != 0 || !strings.Contains(out, "health:      ok") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}

	aside := filepath.Join(t.TempDir(), "aside")
	if err := os.Rename(archive, aside); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"wal", "verify"}, {"status"}} {
		code, out, errs := walCLI(t, append([]string{"--home", h}, args...)...)
		if code != exitCorrupt || !strings.Contains(errs, "archive "+archive+" (seq 1..") || !strings.Contains(errs, "the archive directory is missing") || !strings.Contains(errs, "fix: restore the archive") {
			t.Fatalf("%v with the archive gone: exit %d\n%s%s", args, code, out, errs)
		}
		if strings.Contains(out, "health:      ok") || strings.Contains(out, "\nok\n") {
			t.Fatalf("%v says ok with the archive gone:\n%s", args, out)
		}
	}
	if err := os.Rename(aside, archive); err != nil {
		t.Fatal(err)
	}

	missing := filepath.Join(archive, segs[1])
	if err := os.Rename(missing, missing+".away"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"wal", "verify"}, {"status"}} {
		code, out, errs := walCLI(t, append([]string{"--home", h}, args...)...)
		if code != exitCorrupt || !strings.Contains(errs, missing) {
			t.Fatalf("%v with %s missing: exit %d\n%s%s", args, segs[1], code, out, errs)
		}
	}
	if err := os.Rename(missing+".away", missing); err != nil {
		t.Fatal(err)
	}

	flipped := filepath.Join(archive, segs[2])
	b, err := os.ReadFile(flipped)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(flipped, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := walCLI(t, "--home", h, "wal", "verify")
	if code != exitCorrupt || !strings.Contains(out, "ARCHIVE DAMAGED") || !strings.Contains(errs, flipped) || !strings.Contains(errs, "recover --salvage --apply") {
		t.Fatalf("wal verify with a flipped byte in %s: exit %d\n%s%s", segs[2], code, out, errs)
	}
	rep, _ := wal.VerifyArchives(filepath.Join(h, "wal"), "", true)
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != wal.ArchiveDamaged {
		t.Fatalf("problems %+v", rep.Problems)
	}
}

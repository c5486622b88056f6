package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
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

// viewFiles returns every file of home h outside wal/, state/ and
// quarantine/ (the views, spools, exports) with its bytes.
func viewFiles(t *testing.T, h string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(h, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h, p)
		if d.IsDir() {
			if rel == "wal" || rel == "state" || rel == "quarantine" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBadManifestIsRepairedNotSalvaged (issue 27 finding 3): one flipped
// byte, a truncation, or the loss of wal/MANIFEST (archive intact). Every
// command that meets it exits 3 naming 'compact --repair-manifest' (not
// salvage, which named itself in a loop); salvage refuses, writing no
// placeholder and no stale-views flag; the named repair ends with every
// event present and the views byte-identical.
func TestBadManifestIsRepairedNotSalvaged(t *testing.T) {
	for _, damage := range []string{"flip", "truncate", "lose"} {
		t.Run(damage, func(t *testing.T) {
			h := compactHome(t)
			archive := filepath.Join(t.TempDir(), "archive")
			if code, _, errs := walCLI(t, "--home", h, "compact", "--archive", archive); code != 0 {
				t.Fatal(errs)
			}
			views := viewFiles(t, h)
			if len(views) == 0 || views[filepath.Join("steps", "steps.jsonl")] == "" {
				t.Fatalf("no views: %v", views)
			}
			walDir := filepath.Join(h, "wal")
			segs := walSegmentNames(t, walDir)
			man := filepath.Join(walDir, "MANIFEST")
			b, err := os.ReadFile(man)
			if err != nil {
				t.Fatal(err)
			}
			switch damage {
			case "flip": // one bit of the sum's last digit: still JSON
				i := strings.Index(string(b), `"sum":`)
				j := i + len(`"sum":`)
				for b[j+1] >= '0' && b[j+1] <= '9' {
					j++
				}
				b[j] ^= 0x01
				err = os.WriteFile(man, b, 0o600)
			case "truncate":
				err = os.WriteFile(man, b[:len(b)/2], 0o600)
			case "lose":
				err = os.Remove(man)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"wal", "verify"}, {"recover"}, {"rebuild", "--check"}, {"status"}, {"recover", "--salvage", "--apply"}} {
				code, out, errs := walCLI(t, append([]string{"--home", h}, args...)...)
				if code != exitCorrupt || !strings.Contains(errs, "fix: rebuild wal/MANIFEST from the segments on disk with 'cmlab compact --repair-manifest") || strings.Contains(errs, "fix: see every damaged place") {
					t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
				}
			}
			if _, err := os.Stat(filepath.Join(h, "state", "views-stale")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused salvage left state/views-stale: %v", err)
			}
			// What serve opens first: the daemon's engine.
			eng, err := engine.Open(context.Background(), engine.Options{Home: home.Home{Dir: h}, VerifyAfterOpen: true})
			if err == nil {
				eng.Close()
				t.Fatal("the engine opened a log with a bad manifest")
			}
			if d := describeError("cmlab serve", "", err); !errors.Is(err, wal.ErrBadManifest) || !strings.Contains(d.Fix, "compact --repair-manifest") {
				t.Fatalf("serve: %v\n  fix: %s", err, d.Fix)
			}
			if got := walSegmentNames(t, walDir); !slices.Equal(got, segs) || walSegmentNames(t, walDir)[0] == "00000000000000000001" {
				t.Fatalf("segments after the refused salvage: %v, want %v", got, segs)
			}
			repair := []string{"--home", h, "compact", "--repair-manifest"}
			if damage != "flip" {
				// Nothing names the archive any more: it must be given.
				code, out, errs := walCLI(t, repair...)
				if code == 0 || !strings.Contains(errs, "pass --archive DIR") {
					t.Fatalf("repair without --archive: exit %d\n%s%s", code, out, errs)
				}
				repair = append(repair, "--archive", archive)
			}
			if code, out, errs := walCLI(t, repair...); code != 0 || !strings.Contains(out, "rebuilt: the log starts at seq") {
				t.Fatalf("%v: exit %d\n%s%s", repair, code, out, errs)
			}
			for _, args := range [][]string{{"wal", "verify"}, {"rebuild", "--check"}, {"recover"}, {"status"}} {
				if code, out, errs := walCLI(t, append([]string{"--home", h}, args...)...); code != 0 {
					t.Fatalf("%v after the repair: exit %d\n%s%s", args, code, out, errs)
				}
			}
			if n, errs := dumpCount(t, h); n != 120 {
				t.Fatalf("%d events after the repair: %s", n, errs)
			}
			if got := viewFiles(t, h); !maps.Equal(got, views) {
				t.Fatalf("views changed:\n%v\nwant\n%v", got, views)
			}
		})
	}
}

// TestFlippedArchivedByteIsSalvagedNotBricked (issue 27 finding 7, the
// exact sequence): one flipped byte in an archived segment passed `wal
// verify`; `rebuild --check` pointed to salvage, which exited 3, left
// state/views-stale, and from then on the daemon refused to start. Now
// `wal verify` names the damaged archived file, the named salvage keeps
// every intact archived entry (a placeholder at the lost seq, in the
// archive), and the home opens, verifies and rebuilds clean.
func TestFlippedArchivedByteIsSalvagedNotBricked(t *testing.T) {
	h := compactHome(t)
	archive := filepath.Join(t.TempDir(), "archive")
	if code, _, errs := walCLI(t, "--home", h, "compact", "--archive", archive); code != 0 {
		t.Fatal(errs)
	}
	segs := walSegmentNames(t, archive)
	flipped := filepath.Join(archive, segs[1])
	b, err := os.ReadFile(flipped)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-5] ^= 0x01
	if err := os.WriteFile(flipped, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := walCLI(t, "--home", h, "wal", "verify")
	if code != exitCorrupt || !strings.Contains(errs, flipped) || !strings.Contains(errs, "recover --salvage --apply") {
		t.Fatalf("wal verify: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = walCLI(t, "--home", h, "rebuild", "--check")
	if code != exitCorrupt || !strings.Contains(errs, "recover --salvage --apply") {
		t.Fatalf("rebuild --check: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = walCLI(t, "--home", h, "recover", "--salvage", "--apply")
	if code != 0 || !strings.Contains(out, "wal.salvaged") && !strings.Contains(out, "SALVAGED") && !strings.Contains(out, "lost") {
		t.Fatalf("recover --salvage --apply: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(h, "state", "views-stale")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state/views-stale stays after the salvage: %v", err)
	}
	// What the daemon opens at start.
	eng, err := engine.Open(context.Background(), engine.Options{Home: home.Home{Dir: h}, VerifyAfterOpen: true})
	if err != nil {
		t.Fatalf("the home does not open after the documented fix: %v", err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"wal", "verify"}, {"rebuild", "--check"}, {"status"}} {
		if code, out, errs := walCLI(t, append([]string{"--home", h}, args...)...); code != 0 {
			t.Fatalf("%v after the salvage: exit %d\n%s%s", args, code, out, errs)
		}
	}
	code, out, _ = walCLI(t, "--home", h, "wal", "dump", "--from", "1", "--type", "wal.salvaged")
	placeholders := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, `"segment":"`+segs[1]+`"`) {
			placeholders++
		}
	}
	if n, _ := dumpCount(t, h); code != 0 || n != 120 || placeholders != 1 {
		t.Fatalf("after the salvage: %d events, %d placeholder(s) for %s\n%s", n, placeholders, segs[1], out)
	}
}

// TestAnotherHomesArchiveIsRefused (issue 27 finding 7): `--archive DIR`
// naming another home's archive was accepted; replay and trace showed the
// other home's history and `cmlab rebuild` replaced the home's views with
// it, exit 0. Every reader and compaction refuse it naming both homes, and
// the home's views stay as they were.
func TestAnotherHomesArchiveIsRefused(t *testing.T) {
	a, b := compactHome(t), compactHome(t)
	archA, archB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, c := range [][2]string{{a, archA}, {b, archB}} {
		if code, _, errs := walCLI(t, "--home", c[0], "compact", "--archive", c[1]); code != 0 {
			t.Fatal(errs)
		}
	}
	idB, err := os.ReadFile(filepath.Join(b, "state", "home-id"))
	if err != nil {
		t.Fatal(err)
	}
	views := viewFiles(t, a)
	for _, args := range [][]string{
		{"trace", "m3"},
		{"replay", "--check"},
		{"replay", "--to", "10", "--into", filepath.Join(t.TempDir(), "r")},
		{"rebuild"},
		{"wal", "dump", "--from", "1"},
	} {
		code, out, errs := walCLI(t, append([]string{"--home", a, "--archive", archB}, args...)...)
		if code == 0 || !strings.Contains(errs, "archive of home "+strings.TrimSpace(string(idB))) {
			t.Fatalf("%v with another home's archive: exit %d\n%s%s", args, code, out, errs)
		}
	}
	code, out, errs := walCLI(t, "--home", a, "wal", "verify", "--archive", archB)
	if code != exitCorrupt || !strings.Contains(out, "ARCHIVE FOREIGN") {
		t.Fatalf("wal verify --archive of another home: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := walCLI(t, "--home", a, "compact", "--archive", archB); code == 0 && !strings.Contains(out, "nothing to remove") {
		t.Fatalf("compact into another home's archive: exit %d\n%s%s", code, out, errs)
	}
	if got := viewFiles(t, a); !maps.Equal(got, views) {
		t.Fatal("the home's views changed")
	}
	if code, _, errs := walCLI(t, "--home", a, "rebuild", "--check", "--archive", archA); code != 0 {
		t.Fatalf("rebuild --check with its own archive: exit %d\n%s", code, errs)
	}
}

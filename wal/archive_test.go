package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// flipFileByte XORs one byte of path at off (from the end when negative).
func flipFileByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x5a
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCompactArchiveThatIsTheLogUnderAnotherNameIsRefused: an archive
// directory that is wal/ through a symlink, the home, or wal/ of a home
// given through a symlink once deleted every segment it "archived" (the
// identical copy already there was the file itself). Each is refused, and
// the log keeps every segment and reads whole.
func TestCompactArchiveThatIsTheLogUnderAnotherNameIsRefused(t *testing.T) {
	realHome := t.TempDir()
	links := t.TempDir()
	linkHome := filepath.Join(links, "home")
	if err := os.Symlink(realHome, linkHome); err != nil {
		t.Fatal(err)
	}
	walLink := filepath.Join(links, "wal-link")
	if err := os.Symlink(filepath.Join(realHome, "wal"), walLink); err != nil {
		t.Fatal(err)
	}
	homeLink := filepath.Join(links, "home-link")
	if err := os.Symlink(realHome, homeLink); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, logDir, archive string
	}{
		{"symlink to wal/", filepath.Join(realHome, "wal"), walLink},
		{"home given through a symlink", filepath.Join(linkHome, "wal"), filepath.Join(realHome, "wal")},
		{"wal/ of the symlinked home", filepath.Join(realHome, "wal"), filepath.Join(linkHome, "wal")},
		{"the home", filepath.Join(realHome, "wal"), realHome},
		{"a symlink to the home", filepath.Join(realHome, "wal"), homeLink},
		{"inside wal/ through a symlink", filepath.Join(realHome, "wal"), filepath.Join(walLink, "old")},
	}
	l, _ := compactLog(t, 60, Options{Dir: filepath.Join(realHome, "wal")})
	before := segmentNames(t, l.Dir())
	l.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openT(t, Options{Dir: c.logDir, SegmentSize: 1024})
			defer l.Close()
			_, err := l.Compact(context.Background(), CompactOptions{Before: 50, Archive: c.archive})
			if !errors.Is(err, ErrBadArchive) {
				t.Fatalf("Compact(archive %s): %v, want ErrBadArchive", c.archive, err)
			}
			if got := segmentNames(t, c.logDir); !slices.Equal(got, before) {
				t.Fatalf("log holds %v after a refused compaction, want %v", got, before)
			}
			if m, err := ReadManifest(c.logDir); m != nil || err != nil {
				t.Fatalf("manifest written: %+v, %v", m, err)
			}
			if got := seqsOf(t, l.Events(1)); !slices.Equal(got, seqRange(1, 60)) {
				t.Fatalf("Events(1) = %v", got)
			}
			if err := CheckArchiveDir(c.logDir, c.archive); !errors.Is(err, ErrBadArchive) {
				t.Fatalf("CheckArchiveDir: %v", err)
			}
		})
	}
	os.RemoveAll(filepath.Join(realHome, "wal", "old"))
}

// TestCompactVerifiesTheArchivedCopyBeforeRemoving: a copy damaged after
// its fsync (the disk gave back other bytes) stops the compaction before
// the manifest: nothing is removed, the bad copy is dropped, and the next
// run archives anew and records the archive (ARCHIVE).
func TestCompactVerifiesTheArchivedCopyBeforeRemoving(t *testing.T) {
	l, _ := compactLog(t, 60, Options{})
	dir := l.Dir()
	before := segmentNames(t, dir)
	archive := filepath.Join(t.TempDir(), "archive")
	var damaged string
	_, err := l.Compact(context.Background(), CompactOptions{Before: 50, Archive: archive, HomeID: "home-a", Hook: func(p CompactPhase, seg string) error {
		if p == PhaseVerify && damaged == "" {
			damaged = seg
			flipFileByte(t, filepath.Join(archive, seg), -3)
		}
		return nil
	}})
	if !errors.Is(err, ErrBadArchive) || !strings.Contains(err.Error(), "read back damaged") {
		t.Fatalf("Compact with a copy damaged after fsync: %v", err)
	}
	if got := segmentNames(t, dir); !slices.Equal(got, before) {
		t.Fatalf("log holds %v, want %v", got, before)
	}
	if m, _ := ReadManifest(dir); m != nil {
		t.Fatalf("manifest written: %+v", m)
	}
	if _, err := os.Stat(filepath.Join(archive, damaged)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the damaged copy stays: %v", err)
	}
	res, err := l.Compact(context.Background(), CompactOptions{Before: 50, Archive: archive, HomeID: "home-a"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := ReadArchiveIdentity(archive)
	if err != nil || a == nil || a.HomeID != "home-a" || len(a.Segments) != len(res.Segments) || a.Segments[0].First != 1 || a.Segments[len(a.Segments)-1].Last != res.NewFirstSeq-1 {
		t.Fatalf("ARCHIVE %+v, %v (result %+v)", a, err, res)
	}
	if m, _ := ReadManifest(dir); m == nil || m.HomeID != "home-a" {
		t.Fatalf("manifest %+v", m)
	}
	if got := seqsOf(t, l.Events(1)); !slices.Equal(got, seqRange(1, 60)) {
		t.Fatalf("Events(1) = %v", got)
	}
}

// TestVerifyArchivesNamesWhatIsMissingOrDamaged: the whole archive, one
// segment of it, or one flipped byte in it is reported naming the file,
// frame by frame for the flip (a stat-only check takes ARCHIVE's record,
// whose size the flip keeps).
func TestVerifyArchivesNamesWhatIsMissingOrDamaged(t *testing.T) {
	l, _ := compactLog(t, 80, Options{})
	dir := l.Dir()
	archive := filepath.Join(t.TempDir(), "archive")
	res, err := l.Compact(context.Background(), CompactOptions{Before: 70, Archive: archive, HomeID: "home-a"})
	if err != nil || len(res.Segments) < 4 {
		t.Fatalf("%+v, %v", res, err)
	}
	l.Close()
	for _, frames := range []bool{false, true} {
		rep, err := VerifyArchives(dir, "", frames)
		if err != nil || !rep.OK() || rep.Ranges != 1 || rep.Segments != len(res.Segments) || rep.Entries != res.NewFirstSeq-1 {
			t.Fatalf("sound archive (frames %v): %+v, %v", frames, rep, err)
		}
	}
	seg2 := res.Segments[2]
	flipFileByte(t, filepath.Join(archive, res.Segments[1].Name), 10)
	if err := os.Rename(filepath.Join(archive, seg2.Name), filepath.Join(t.TempDir(), "x")); err != nil {
		t.Fatal(err)
	}
	rep, _ := VerifyArchives(dir, "", true)
	if len(rep.Problems) != 2 {
		t.Fatalf("problems %+v", rep.Problems)
	}
	if p := rep.Problems[0]; p.Kind != ArchiveDamaged || p.File != filepath.Join(archive, res.Segments[1].Name) || p.Bad == nil {
		t.Fatalf("flipped byte: %+v", p)
	}
	if p := rep.Problems[1]; p.Kind != ArchiveMissing || p.File != filepath.Join(archive, seg2.Name) || p.First != seg2.First || p.Last != seg2.Last {
		t.Fatalf("missing segment: %+v (segment %+v)", p, seg2)
	}
	rep, _ = VerifyArchives(dir, "", false)
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != ArchiveMissing {
		t.Fatalf("stat-only check: %+v", rep.Problems)
	}
	if err := os.RemoveAll(archive); err != nil {
		t.Fatal(err)
	}
	rep, _ = VerifyArchives(dir, "", false)
	if len(rep.Problems) != 1 || rep.Problems[0].File != archive || rep.Problems[0].First != 1 || rep.Problems[0].Last != res.NewFirstSeq-1 {
		t.Fatalf("archive gone: %+v", rep.Problems)
	}
}

// TestArchiveOfAnotherHomeIsRefused: an archive records its home; another
// home's archive is refused for reading (--archive) and for compacting.
func TestArchiveOfAnotherHomeIsRefused(t *testing.T) {
	la, _ := compactLog(t, 60, Options{})
	lb, _ := compactLog(t, 60, Options{})
	archA, archB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if _, err := la.Compact(context.Background(), CompactOptions{Before: 30, Archive: archA, HomeID: "home-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Compact(context.Background(), CompactOptions{Before: 30, Archive: archB, HomeID: "home-b"}); err != nil {
		t.Fatal(err)
	}
	r := mustOpenReader(t, la.Dir())
	r.SetArchive(archB)
	for _, err := range r.Events(1) {
		if !errors.Is(err, ErrForeignArchive) || !strings.Contains(err.Error(), "home-b") {
			t.Fatalf("reading home-a with home-b's archive: %v", err)
		}
		break
	}
	if _, err := la.Compact(context.Background(), CompactOptions{Before: 50, Archive: archB, HomeID: "home-a"}); !errors.Is(err, ErrForeignArchive) {
		t.Fatalf("compacting into another home's archive: %v", err)
	}
	rep, _ := VerifyArchives(la.Dir(), archB, true)
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != ArchiveForeign {
		t.Fatalf("verify with another home's archive: %+v", rep.Problems)
	}
	// Its own archive still reads.
	r.SetArchive(archA)
	if got := seqsOf(t, r.Events(1)); !slices.Equal(got, seqRange(1, 60)) {
		t.Fatalf("Events(1) = %v", got)
	}
}

// TestArchiveMadeBeforeHomeIDsStillReadsAndIsRecorded: a home compacted
// before home ids (no ARCHIVE, no home_id in the manifest) reads as before,
// stat-only checks read its segments, and RepairManifest on its sound
// manifest records the home id in both without touching a sequence; from
// then on another home's archive is refused for it.
func TestArchiveMadeBeforeHomeIDsStillReadsAndIsRecorded(t *testing.T) {
	l, _ := compactLog(t, 60, Options{})
	dir := l.Dir()
	archive := filepath.Join(t.TempDir(), "archive")
	res, err := l.Compact(context.Background(), CompactOptions{Before: 40, Archive: archive})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	// What the old code left: no ARCHIVE.
	if err := os.Remove(filepath.Join(archive, archiveIdentityName)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, manifestName))
	if m, _ := ReadManifest(dir); m.HomeID != "" {
		t.Fatalf("manifest %+v", m)
	}
	r := mustOpenReader(t, dir)
	if got := seqsOf(t, r.Events(1)); !slices.Equal(got, seqRange(1, 60)) {
		t.Fatalf("Events(1) = %v", got)
	}
	if rep, err := VerifyArchives(dir, "", false); err != nil || !rep.OK() || rep.Entries != res.NewFirstSeq-1 {
		t.Fatalf("stat-only check of an unrecorded archive: %+v %v", rep, err)
	}
	rep, err := RepairManifest(dir, RepairOptions{HomeID: "home-old"})
	if err != nil || rep.Was != "sound" || !rep.Written {
		t.Fatalf("RepairManifest: %+v %v", rep, err)
	}
	m, err := ReadManifest(dir)
	if err != nil || m.HomeID != "home-old" || m.FirstSeq != res.NewFirstSeq || len(m.Removed) != 1 {
		t.Fatalf("manifest after: %+v %v (before %s)", m, err, before)
	}
	a, err := ReadArchiveIdentity(archive)
	if err != nil || a == nil || a.HomeID != "home-old" || len(a.Segments) != len(res.Segments) {
		t.Fatalf("ARCHIVE after: %+v %v", a, err)
	}
	if got := seqsOf(t, r.Events(1)); !slices.Equal(got, seqRange(1, 60)) {
		t.Fatalf("Events(1) after = %v", got)
	}
	// An archive recording no home is refused now that the log has one.
	other := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(other, os.DirFS(archive)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(other, archiveIdentityName))
	r.SetArchive(other)
	for _, err := range r.Events(1) {
		if !errors.Is(err, ErrForeignArchive) || !strings.Contains(err.Error(), "--repair-manifest") {
			t.Fatalf("an unrecorded --archive for a recorded log: %v", err)
		}
		break
	}
}

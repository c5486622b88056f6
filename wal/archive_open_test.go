package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func archiveErr(t *testing.T, err error) *ArchiveError {
	t.Helper()
	var ae *ArchiveError
	if !errors.As(err, &ae) || !errors.Is(err, ErrArchive) {
		t.Fatalf("want an *ArchiveError, got %v", err)
	}
	return ae
}

// TestOpenChecksTheArchive: Open refuses a compacted log whose archive is
// gone, holds a damaged segment (found by reading it: its mtime changed),
// or holds a segment whose frames are sound but whose bytes are not the
// ones archived (another log's segment of the same seqs). A sound archive
// is read whole once and recorded in wal/VERIFIED; the next Open only
// stats it (a flip that keeps size and mtime is then wal verify's to find,
// VerifyArchives with frames).
func TestOpenChecksTheArchive(t *testing.T) {
	la, _ := compactLog(t, 60, Options{NoSync: true})
	lb, _ := compactLog(t, 60, Options{NoSync: true})
	dir := la.Dir()
	arch, archB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	res, err := la.Compact(context.Background(), CompactOptions{Before: 40, Archive: arch, HomeID: "home-a"})
	if err != nil || len(res.Segments) < 3 {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, err := lb.Compact(context.Background(), CompactOptions{Before: 40, Archive: archB, HomeID: "home-b"}); err != nil {
		t.Fatal(err)
	}
	la.Close()
	lb.Close()
	open := func() error {
		l, err := Open(Options{Dir: dir, NoSync: true})
		if err == nil {
			l.Close()
		}
		return err
	}
	if err := open(); err != nil {
		t.Fatalf("sound archive: %v", err)
	}
	rec := readVerified(dir)
	if rec == nil || len(rec.Archived) != len(res.Segments) {
		t.Fatalf("wal/VERIFIED after open: %+v", rec)
	}
	seg := filepath.Join(arch, res.Segments[1].Name)
	orig, _ := os.ReadFile(seg)

	flipFileByte(t, seg, 20)
	ae := archiveErr(t, open())
	if p := ae.Report.Problems[0]; p.Kind != ArchiveDamaged || p.File != seg {
		t.Fatalf("flipped: %+v", ae.Report.Problems)
	}
	os.WriteFile(seg, orig, 0o600)
	if err := open(); err != nil {
		t.Fatalf("put back: %v", err)
	}

	// Another log's segment of the same seqs: frames sound, bytes not ours.
	other, _ := os.ReadFile(filepath.Join(archB, res.Segments[1].Name))
	if string(other) == string(orig) {
		t.Fatal("the two logs' segments are the same bytes")
	}
	os.WriteFile(seg, other, 0o600)
	ae = archiveErr(t, open())
	if p := ae.Report.Problems[0]; p.Kind != ArchiveForeign || p.File != seg {
		t.Fatalf("foreign segment: %+v", ae.Report.Problems)
	}
	os.WriteFile(seg, orig, 0o600)
	if err := open(); err != nil {
		t.Fatalf("put back: %v", err)
	}

	// Unchanged size and mtime: trusted at open, found by wal verify.
	fi, _ := os.Stat(seg)
	flipFileByte(t, seg, 20)
	os.Chtimes(seg, fi.ModTime(), fi.ModTime())
	if err := open(); err != nil {
		t.Fatalf("open read a recorded, unchanged archived segment: %v", err)
	}
	if rep, _ := VerifyArchives(dir, "", true); rep.OK() {
		t.Fatal("wal verify missed the flipped byte")
	}
	os.WriteFile(seg, orig, 0o600)

	if err := os.Remove(filepath.Join(arch, res.Segments[0].Name)); err != nil {
		t.Fatal(err)
	}
	ae = archiveErr(t, open())
	if p := ae.Report.Problems[0]; p.Kind != ArchiveMissing || p.First != 1 {
		t.Fatalf("missing segment: %+v", ae.Report.Problems)
	}
	os.RemoveAll(arch)
	ae = archiveErr(t, open())
	if p := ae.Report.Problems[0]; p.Kind != ArchiveMissing || p.File != arch {
		t.Fatalf("archive gone: %+v", ae.Report.Problems)
	}
	// Another home's archive given in its place.
	l, err := Open(Options{Dir: dir, NoSync: true, Archive: archB})
	if err == nil {
		l.Close()
	}
	if p := archiveErr(t, err).Report.Problems[0]; p.Kind != ArchiveForeign {
		t.Fatalf("another home's archive: %+v", p)
	}
}

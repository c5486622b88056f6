package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lastFrames returns the frames of the log in dir's last segment.
func lastFrames(t *testing.T, dir string) (string, []frameLoc) {
	t.Helper()
	all := frames(t, dir)
	seg := all[len(all)-1].seg
	var out []frameLoc
	for _, f := range all {
		if f.seg == seg {
			out = append(out, f)
		}
	}
	return seg, out
}

func corruptErr(t *testing.T, err error) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *CorruptError, got %v", err)
	}
	return ce
}

// TestTailCutThroughAckedIsRefused: the last segment cut inside an
// acknowledged frame, or at a frame boundary before the acknowledged seq,
// is corruption when Options.Acked says so: Open refuses and changes
// nothing (no byte cut, nothing quarantined), VerifyWith names it; with
// Acked 0 it is a torn tail as before, and with AcceptTailLoss (a salvage
// accepted the loss) Open cuts it.
func TestTailCutThroughAckedIsRefused(t *testing.T) {
	for _, atBoundary := range []bool{false, true} {
		home := t.TempDir()
		dir := filepath.Join(home, "wal")
		buildLog(t, home, 30, 2048)
		seg, fr := lastFrames(t, dir)
		if len(fr) < 3 {
			t.Fatalf("last segment holds %d frames", len(fr))
		}
		cut := fr[len(fr)-2] // the last two acknowledged entries go
		size := int64(cut.off + cut.len/2)
		if atBoundary {
			size = int64(cut.off)
		}
		path := filepath.Join(dir, seg)
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Dir: dir, NoSync: true, Acked: 30})
		ce := corruptErr(t, err)
		if b := ce.Bad[0]; !strings.HasPrefix(b.Reason, ReasonAckedCut) || b.Seq != cut.seq || b.Lost != 30-cut.seq+1 || b.TornTail {
			t.Fatalf("atBoundary %v: bad %+v", atBoundary, b)
		}
		if fi, _ := os.Stat(path); fi.Size() != size {
			t.Fatalf("refused open changed the segment: %d bytes, want %d", fi.Size(), size)
		}
		if q, _ := os.ReadDir(filepath.Join(home, "quarantine")); len(q) != 0 {
			t.Fatalf("refused open quarantined %d file(s)", len(q))
		}
		rep, verr := VerifyWith(dir, VerifyOptions{Acked: 30})
		if verr == nil || rep.OK() || rep.TornTail != nil || !strings.HasPrefix(rep.Bad[0].Reason, ReasonAckedCut) {
			t.Fatalf("VerifyWith: %+v, %v", rep, verr)
		}
		if rep, err := VerifyWith(dir, VerifyOptions{Acked: cut.seq - 1}); err != nil || !rep.OK() {
			t.Fatalf("acked before the cut: %+v, %v", rep, err)
		}
		l, err := Open(Options{Dir: dir, NoSync: true, Acked: 30, AcceptTailLoss: true})
		if err != nil {
			t.Fatalf("AcceptTailLoss: %v", err)
		}
		want := cut.seq - 1
		if !atBoundary {
			want++ // the wal.repaired event of the cut
		}
		if got := l.LastSeq(); got != want {
			t.Fatalf("atBoundary %v: last seq %d after the accepted cut, want %d", atBoundary, got, want)
		}
		l.Close()
	}
}

// TestTailOfAnotherSegmentIsRefused: the last segment replaced by another
// log's segment whose frames are whole (their CRCs good) but carry other
// seqs is never a torn write: refused without any Acked.
func TestTailOfAnotherSegmentIsRefused(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	buildLog(t, a, 30, 2048)
	buildLog(t, b, 12, 1<<20)
	seg, _ := lastFrames(t, filepath.Join(a, "wal"))
	other, err := os.ReadFile(filepath.Join(b, "wal", segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if seg == segmentName(1) {
		t.Fatal("log a has one segment")
	}
	path := filepath.Join(a, "wal", seg)
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: filepath.Join(a, "wal"), NoSync: true})
	if bad := corruptErr(t, err).Bad[0]; !strings.Contains(bad.Reason, ReasonSeq) || !strings.HasPrefix(bad.Reason, ReasonAckedCut) {
		t.Fatalf("bad %+v", bad)
	}
	if got, _ := os.ReadFile(path); len(got) != len(other) {
		t.Fatalf("refused open changed the segment")
	}
}

// TestAcceptedCutOfACompactedLogsOnlySegment: a compacted log whose one
// retained segment loses its every entry (salvage accepted the loss)
// opens, and the next entry gets the first retained seq.
func TestAcceptedCutOfACompactedLogsOnlySegment(t *testing.T) {
	l, _ := compactLog(t, 38, Options{NoSync: true}) // 5 entries a segment
	dir := l.Dir()
	res, err := l.Compact(context.Background(), CompactOptions{Before: 39, Archive: filepath.Join(t.TempDir(), "archive"), HomeID: "h"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	segs := segmentNames(t, dir)
	if len(segs) != 1 {
		t.Fatalf("retained %v", segs)
	}
	first := res.NewFirstSeq
	if segs[0] != segmentName(first) || first != 36 {
		t.Fatalf("retained %v from seq %d", segs, first)
	}
	if err := os.Truncate(filepath.Join(dir, segs[0]), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, NoSync: true, Acked: 38}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("not accepted: %v", err)
	}
	l2, err := Open(Options{Dir: dir, NoSync: true, Acked: 38, AcceptTailLoss: true})
	if err != nil {
		t.Fatalf("accepted: %v", err)
	}
	defer l2.Close()
	if l2.FirstSeq() != first || l2.LastSeq() != first {
		t.Fatalf("first %d last %d, want %d, %d (the repair event)", l2.FirstSeq(), l2.LastSeq(), first, first)
	}
}

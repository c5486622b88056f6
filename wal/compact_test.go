package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// compactLog builds a log of n events in 1 KiB segments and returns it,
// open, with the events.
func compactLog(t *testing.T, n int, opts Options) (*Log, []*events.Event) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "wal")
	}
	opts.SegmentSize = 1024
	l := openT(t, opts)
	return l, appendN(t, l, n)
}

// seqsOf reads every event of it and returns their sequences, failing
// the test on an error.
func seqsOf(t *testing.T, it func(func(*events.Event, error) bool)) []uint64 {
	t.Helper()
	var out []uint64
	for ev, err := range it {
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		out = append(out, ev.Seq)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// segmentNames lists the segment files of dir.
func segmentNames(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range segs {
		out = append(out, s.Name)
	}
	return out
}

func TestCompactArchiveKeepsTheLogReadable(t *testing.T) {
	l, evs := compactLog(t, 60, Options{})
	dir := l.Dir()
	before := segmentNames(t, dir)
	if len(before) < 5 {
		t.Fatalf("want at least 5 segments, got %v", before)
	}
	archive := filepath.Join(t.TempDir(), "archive")
	// Before 30: every segment wholly before seq 30 goes.
	res, err := l.Compact(context.Background(), CompactOptions{Before: 30, Archive: archive})
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstSeq != 1 || res.NewFirstSeq <= 1 || res.NewFirstSeq > 30 {
		t.Fatalf("result %+v", res)
	}
	var moved []string
	for _, s := range res.Segments {
		moved = append(moved, s.Name)
		if s.Last >= 30 {
			t.Fatalf("removed segment %s holds seq %d ≥ 30", s.Name, s.Last)
		}
	}
	if got := segmentNames(t, archive); !slices.Equal(got, moved) {
		t.Fatalf("archive holds %v, want %v", got, moved)
	}
	if got := segmentNames(t, dir); !slices.Equal(got, before[len(moved):]) || got[0] != segmentName(res.NewFirstSeq) {
		t.Fatalf("log holds %v, want %v starting at %d", got, before[len(moved):], res.NewFirstSeq)
	}
	if l.FirstSeq() != res.NewFirstSeq {
		t.Fatalf("FirstSeq %d, want %d", l.FirstSeq(), res.NewFirstSeq)
	}
	// The whole history still reads, archive first.
	if got := seqsOf(t, l.Events(1)); !slices.Equal(got, seqRange(1, 60)) {
		t.Fatalf("Events(1) = %v", got)
	}
	r, _ := OpenReader(dir)
	if got := seqsOf(t, r.Events(5)); !slices.Equal(got, seqRange(5, 60)) {
		t.Fatalf("Reader.Events(5) = %v", got)
	}
	if ev, err := l.Read(1); err != nil || ev.ID != evs[0].ID {
		t.Fatalf("Read(1) after compaction (from the archive): %v, %v", ev, err)
	}
	rep, err := Verify(dir)
	if err != nil || rep.First != res.NewFirstSeq || rep.Last != 60 || rep.Manifest == nil || len(rep.Pending) != 0 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	st, err := Stat(dir)
	if err != nil || st.First != res.NewFirstSeq || st.Events != 60-res.NewFirstSeq+1 {
		t.Fatalf("Stat: first %d events %d, %v", st.First, st.Events, err)
	}
	// Reopen: the log starts at the first retained seq and appends on.
	l.Close()
	l2 := openT(t, Options{Dir: dir, SegmentSize: 1024})
	if l2.FirstSeq() != res.NewFirstSeq || l2.LastSeq() != 60 {
		t.Fatalf("reopened: first %d last %d", l2.FirstSeq(), l2.LastSeq())
	}
	more := appendN(t, l2, 3)
	if more[0].Seq != 61 {
		t.Fatalf("append after compaction got seq %d", more[0].Seq)
	}
	got, err := l2.Read(res.NewFirstSeq)
	if err != nil || got.ID != evs[res.NewFirstSeq-1].ID {
		t.Fatalf("Read(first): %v, %v", got, err)
	}
	// A second compaction adds to the same range of the manifest.
	res2, err := l2.Compact(context.Background(), CompactOptions{Before: 50, Archive: archive})
	if err != nil || res2.FirstSeq != res.NewFirstSeq || res2.NewFirstSeq <= res.NewFirstSeq {
		t.Fatalf("second compaction %+v, %v", res2, err)
	}
	m, err := ReadManifest(dir)
	if err != nil || len(m.Removed) != 1 || m.Removed[0].First != 1 || m.Removed[0].Last != res2.NewFirstSeq-1 {
		t.Fatalf("manifest %+v, %v", m, err)
	}
	if got := seqsOf(t, l2.Events(1)); !slices.Equal(got, seqRange(1, 63)) {
		t.Fatalf("Events(1) after two compactions = %v", got)
	}
}

func TestCompactDeleteRefusesEarlierSeqs(t *testing.T) {
	l, _ := compactLog(t, 40, Options{})
	res, err := l.Compact(context.Background(), CompactOptions{Before: 20})
	if err != nil || res.NewFirstSeq <= 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	var ce *CompactedError
	for _, err := range l.Events(1) {
		if err != nil {
			if !errors.As(err, &ce) || !errors.Is(err, ErrCompacted) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("Events(1): %v", err)
			}
			break
		}
		t.Fatal("Events(1) yielded an event of a deleted range")
	}
	if ce == nil || ce.Seq != 1 || ce.FirstSeq != res.NewFirstSeq || ce.Range.Archive != "" {
		t.Fatalf("CompactedError %+v", ce)
	}
	if _, err := l.Read(2); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Read(2) of a deleted range: %v", err)
	}
	if got := seqsOf(t, l.Events(res.NewFirstSeq)); !slices.Equal(got, seqRange(res.NewFirstSeq, 40)) {
		t.Fatalf("Events(first) = %v", got)
	}
	// A dry run removes nothing.
	dry, err := l.Compact(context.Background(), CompactOptions{Before: 35, DryRun: true})
	if err != nil || len(dry.Segments) == 0 || dry.NewFirstSeq <= res.NewFirstSeq || l.FirstSeq() != res.NewFirstSeq {
		t.Fatalf("dry run %+v, %v", dry, err)
	}
	if segmentNames(t, l.Dir())[0] != segmentName(res.NewFirstSeq) {
		t.Fatal("dry run removed a segment")
	}
}

func TestCompactNeverRemovesTheTail(t *testing.T) {
	l, _ := compactLog(t, 30, Options{})
	segs := segmentNames(t, l.Dir())
	res, err := l.Compact(context.Background(), CompactOptions{Before: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if got := segmentNames(t, l.Dir()); len(got) != 1 || got[0] != segs[len(segs)-1] || len(res.Segments) != len(segs)-1 {
		t.Fatalf("left %v of %v (%+v)", got, segs, res)
	}
	appendN(t, l, 5)
	if l.LastSeq() != 35 {
		t.Fatalf("last %d", l.LastSeq())
	}
}

func TestCompactArchiveMovedOrMissing(t *testing.T) {
	l, _ := compactLog(t, 40, Options{})
	dir := l.Dir()
	archive := filepath.Join(t.TempDir(), "archive")
	res, err := l.Compact(context.Background(), CompactOptions{Before: 25, Archive: archive})
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(archive, moved); err != nil {
		t.Fatal(err)
	}
	r, _ := OpenReader(dir)
	var ce *CompactedError
	for _, err := range r.Events(1) {
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("moved archive: %v", err)
		}
	}
	if ce == nil || ce.Range.Archive != archive || ce.Seq != 1 {
		t.Fatalf("moved archive: %+v", ce)
	}
	r.SetArchive(moved)
	if got := seqsOf(t, r.Events(1)); !slices.Equal(got, seqRange(1, 40)) {
		t.Fatalf("with SetArchive: %v", got)
	}
	// An archive missing a segment in the middle names the seq.
	if err := os.Remove(filepath.Join(moved, res.Segments[1].Name)); err != nil {
		t.Fatal(err)
	}
	ce = nil
	n := 0
	for ev, err := range r.Events(1) {
		if err != nil {
			if !errors.As(err, &ce) {
				t.Fatalf("missing archived segment: %v", err)
			}
			break
		}
		n++
		_ = ev
	}
	if ce == nil || ce.Seq != res.Segments[1].First || uint64(n) != res.Segments[1].First-1 {
		t.Fatalf("missing archived segment: %+v after %d events", ce, n)
	}
}

func TestCompactENOSPCKeepsEverything(t *testing.T) {
	for _, archive := range []bool{true, false} {
		name := map[bool]string{true: "archive copy", false: "manifest"}[archive]
		t.Run(name, func(t *testing.T) {
			f := &Faults{}
			l, _ := compactLog(t, 40, Options{Faults: f})
			dir := l.Dir()
			before := snapshot(t, dir)
			o := CompactOptions{Before: 25}
			if archive {
				o.Archive = filepath.Join(t.TempDir(), "archive")
			}
			f.FailCompactWrite(syscall.ENOSPC)
			res, err := l.Compact(context.Background(), o)
			if !errors.Is(err, syscall.ENOSPC) || res.NewFirstSeq != 1 || f.Fired() != 1 {
				t.Fatalf("Compact under ENOSPC: %+v, %v", res, err)
			}
			after := snapshot(t, dir)
			for name, b := range before {
				if string(after[name]) != string(b) {
					t.Fatalf("%s changed under ENOSPC", name)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, manifestName)); !errors.Is(err, os.ErrNotExist) || l.FirstSeq() != 1 || len(after) != len(before) {
				t.Fatal("a manifest was written under ENOSPC")
			}
			if l.Err() != nil {
				t.Fatalf("the log failed: %v", l.Err())
			}
			appendN(t, l, 1)
			// Retried later: it works.
			res, err = l.Compact(context.Background(), o)
			if err != nil || res.NewFirstSeq <= 1 {
				t.Fatalf("retry: %+v, %v", res, err)
			}
		})
	}
}

// writeTestManifest writes m into dir as compaction would.
func writeTestManifest(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	if err := writeManifest(nil, dir, m, true); err != nil {
		t.Fatal(err)
	}
}

func TestManifestPointingPastTheLogIsCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(segs []string) uint64 // the manifest's first retained seq
	}{
		{"past the log", func([]string) uint64 { return 10_000 }},
		{"inside a segment", func(segs []string) uint64 { return 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := compactLog(t, 40, Options{})
			dir := l.Dir()
			l.Close()
			segs := segmentNames(t, dir)
			first := tc.first(segs)
			writeTestManifest(t, dir, &Manifest{FirstSeq: first, Removed: []RemovedRange{{First: 1, Last: first - 1}}})
			before := snapshot(t, dir)
			_, err := Open(Options{Dir: dir, SegmentSize: 1024})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Bad[0].Segment != segmentName(first) {
				t.Fatalf("Open: %v", err)
			}
			if _, err := Verify(dir); !errors.As(err, &ce) || ce.Bad[0].Segment != segmentName(first) {
				t.Fatalf("Verify: %v", err)
			}
			for _, err := range mustOpenReader(t, dir).Events(first) {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Reader: %v", err)
				}
				break
			}
			after := snapshot(t, dir)
			for name := range before {
				if _, ok := after[name]; !ok {
					t.Fatalf("%s removed", name)
				}
			}
		})
	}
}

func TestMissingRetainedSegmentIsCorrupt(t *testing.T) {
	l, _ := compactLog(t, 60, Options{})
	dir := l.Dir()
	res, err := l.Compact(context.Background(), CompactOptions{Before: 20})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	segs := segmentNames(t, dir)
	// The retained head, then a segment in the middle.
	for _, victim := range []string{segs[0], segs[2]} {
		t.Run(victim, func(t *testing.T) {
			saved, err := os.ReadFile(filepath.Join(dir, victim))
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, victim))
			defer os.WriteFile(filepath.Join(dir, victim), saved, 0o600)
			_, err = Open(Options{Dir: dir, SegmentSize: 1024})
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open: %v", err)
			}
			if victim == segs[0] && (ce.Bad[0].Segment != segmentName(res.NewFirstSeq) || ce.Bad[0].Seq != res.NewFirstSeq) {
				t.Fatalf("missing head: %v", ce)
			}
			if _, err := Verify(dir); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

func TestBadManifestIsCorrupt(t *testing.T) {
	l, _ := compactLog(t, 40, Options{})
	dir := l.Dir()
	if _, err := l.Compact(context.Background(), CompactOptions{Before: 20}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	path := filepath.Join(dir, manifestName)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0x01
	os.WriteFile(path, b, 0o600)
	before := segmentNames(t, dir)
	if _, err := Open(Options{Dir: dir, SegmentSize: 1024}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a garbled manifest: %v", err)
	}
	if rep, err := Verify(dir); !errors.Is(err, ErrCorrupt) || rep.Bad[0].Segment != manifestName {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
	if got := segmentNames(t, dir); !slices.Equal(got, before) {
		t.Fatalf("segments changed: %v → %v", before, got)
	}
}

func TestArchiveInsideTheLogIsRefused(t *testing.T) {
	l, _ := compactLog(t, 30, Options{})
	for _, a := range []string{l.Dir(), filepath.Join(l.Dir(), "old")} {
		if _, err := l.Compact(context.Background(), CompactOptions{Before: 20, Archive: a}); !errors.Is(err, ErrBadArchive) {
			t.Fatalf("archive %s: %v", a, err)
		}
	}
	if l.FirstSeq() != 1 {
		t.Fatal("compacted")
	}
}

func mustOpenReader(t *testing.T, dir string) *Reader {
	t.Helper()
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSalvageRecreatesAMissingRetainedHead(t *testing.T) {
	l, evs := compactLog(t, 60, Options{})
	dir := l.Dir()
	res, err := l.Compact(context.Background(), CompactOptions{Before: 20})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	segs := segmentNames(t, dir)
	os.Remove(filepath.Join(dir, segs[0]))
	rep, err := Salvage(dir, filepath.Join(filepath.Dir(dir), "quarantine"))
	if err != nil {
		t.Fatal(err)
	}
	second, _ := listSegments(dir)
	if len(rep.Rewritten) != 1 || rep.Rewritten[0] != segmentName(res.NewFirstSeq) || rep.Lost[0].Seq != res.NewFirstSeq {
		t.Fatalf("salvage %+v (segments now %v)", rep, second)
	}
	l2 := openT(t, Options{Dir: dir, SegmentSize: 1024})
	if l2.FirstSeq() != res.NewFirstSeq || l2.LastSeq() != 60 {
		t.Fatalf("after salvage: first %d last %d", l2.FirstSeq(), l2.LastSeq())
	}
	ev, err := l2.Read(res.NewFirstSeq)
	if err != nil || ev.Type != events.TypeWalSalvaged {
		t.Fatalf("head after salvage: %v %v", ev, err)
	}
	if ev, err := l2.Read(60); err != nil || ev.ID != evs[59].ID {
		t.Fatalf("tail after salvage: %v %v", ev, err)
	}
}

func TestArchiveOfAnotherLogIsNeverOverwritten(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "shared")
	a, _ := compactLog(t, 40, Options{})
	if _, err := a.Compact(context.Background(), CompactOptions{Before: 30, Archive: archive}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, archive)
	b, _ := compactLog(t, 40, Options{Now: func() time.Time { return fixedNow().Add(time.Hour) }})
	_, err := b.Compact(context.Background(), CompactOptions{Before: 30, Archive: archive})
	if !errors.Is(err, ErrBadArchive) || b.FirstSeq() != 1 {
		t.Fatalf("second log into the same archive: %v (first %d)", err, b.FirstSeq())
	}
	after := snapshot(t, archive)
	for name, data := range before {
		if string(after[name]) != string(data) {
			t.Fatalf("%s of the first log's archive was overwritten", name)
		}
	}
	if got := seqsOf(t, a.Events(1)); !slices.Equal(got, seqRange(1, 40)) {
		t.Fatalf("first log after the refused compaction: %v", got)
	}
}

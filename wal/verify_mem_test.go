package wal

import (
	"path/filepath"
	"runtime"
	"testing"
)

// TestVerifyAfterOpenMemoryBounded: the verification after open reads
// the sealed segments one at a time into one buffer, so what it allocates
// does not grow with the log: 40 segments of 64 KiB verified with less
// than 4 segments' worth of allocation (before: a new buffer per segment).
func TestVerifyAfterOpenMemoryBounded(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "wal")
	const segSize = 64 << 10
	buildLog(t, home, 10000, segSize)
	segs, _ := listSegments(dir)
	if len(segs) < 30 {
		t.Fatalf("%d segments, want at least 30", len(segs))
	}
	open := func() *Log {
		l, err := Open(Options{Dir: dir, SegmentSize: segSize, Now: fixedNow, NoSync: true, VerifyAfterOpen: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open() // the first open reads every segment and records them
	l.StartVerification()
	waitLogVerified(t, l)
	l.Close()

	l = open()
	defer l.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l.StartVerification()
	rep := waitLogVerified(t, l)
	runtime.ReadMemStats(&after)
	if rep.Err != nil || rep.Segments != len(segs)-1 {
		t.Fatalf("report %+v, want %d segments verified", rep, len(segs)-1)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d segments, %d bytes verified, %d bytes allocated", rep.Segments, rep.Bytes, alloc)
	if alloc > 4*segSize {
		t.Fatalf("verification allocated %d bytes for %d bytes of log: more than 4 segments (%d)", alloc, rep.Bytes, 4*segSize)
	}
}

package wal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// TestSegmentsUsage: written bytes end at the last valid frame of the
// last segment; bytes after it (a torn tail, preallocated zeros) count as
// allocated only.
func TestSegmentsUsage(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := l.Append(context.Background(), events.MustNew("s", &events.WalSalvaged{LostSeq: uint64(i), Reason: "x"})); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := Segments(dir)
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v %v", segs, err)
	}
	size := segs[0].Size
	u, err := SegmentsUsage(dir, segs)
	if err != nil || u.Written != size || u.Allocated != size {
		t.Fatalf("clean log: %+v %v, want %d both", u, err, size)
	}
	f, err := os.OpenFile(filepath.Join(dir, segs[0].Name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0x40, 1, 2, 3}) // a frame cut short
	f.Write(make([]byte, 100))
	f.Close()
	segs, _ = Segments(dir)
	u, err = SegmentsUsage(dir, segs)
	if err != nil || u.Written != size || u.Allocated != size+104 {
		t.Fatalf("torn tail: %+v %v, want written %d allocated %d", u, err, size, size+104)
	}
	// The mapped scan and a scan of the file read into memory agree.
	path := filepath.Join(dir, segs[0].Name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seg := segmentFile{Name: segs[0].Name, First: segs[0].First}
	msize, mend, err := mappedScan(path, seg)
	if want := scanSegment(seg, data, true, false).End; err != nil || msize != int64(len(data)) || mend != want || mend != size {
		t.Fatalf("mapped scan: size %d end %d %v, want %d %d", msize, mend, err, len(data), want)
	}
	// An empty last segment (which cannot be mapped) is read: nothing
	// written, nothing allocated.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if msize, mend, err := mappedScan(path, seg); err != nil || msize != 0 || mend != 0 {
		t.Fatalf("empty segment: size %d end %d %v", msize, mend, err)
	}
	segs, _ = Segments(dir)
	if u, err = SegmentsUsage(dir, segs); err != nil || u.Written != 0 || u.Allocated != 0 {
		t.Fatalf("empty segment: %+v %v", u, err)
	}
}

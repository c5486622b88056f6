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
}

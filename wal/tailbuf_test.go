package wal

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cmlab/cmlab/events"
)

// tailData returns the address and capacity of tidwall's tail ebuf.
func tailData(t *testing.T, l *Log) (uintptr, int) {
	t.Helper()
	l.tww.tb.mu.RLock()
	defer l.tww.tb.mu.RUnlock()
	ebuf, _ := l.tww.tb.fields()
	b := ebuf.Bytes()
	return uintptr(unsafe.Pointer(unsafe.SliceData(b))), cap(b)
}

// With the tidwall/wal version go.mod pins, every tail segment, from Open
// on and after each cycle, gets a buffer with room for the whole segment
// before its first growth: WriteBatch never copies the segment it grows
// (the stalls of the stall probe), and every entry reads back intact.
func TestTailBufPresizes(t *testing.T) {
	const seg = 256 << 10
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: seg, NoSync: true})
	if l.tww.tb == nil {
		t.Fatal("tailBuf found no tidwall layout to size: tidwall/wal's fields changed")
	}
	ptr, c := tailData(t, l)
	if c < seg {
		t.Fatalf("tail buffer after Open has capacity %d, want ≥ %d", c, seg)
	}
	var evs []*events.Event
	moves, segsSeen := 0, 1
	lastSegs := 1
	for i := 0; i < 6000; i++ {
		ev := testEvent(i)
		batch := []*events.Event{ev}
		if i%50 == 0 {
			batch = append(batch, testEvent(100000+i), testEvent(200000+i))
		}
		if _, err := l.Append(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, batch...)
		segs, err := listSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		p, c := tailData(t, l)
		if len(segs) != lastSegs {
			// A new segment: a new buffer, big enough.
			segsSeen++
			lastSegs = len(segs)
			if c < seg {
				t.Fatalf("segment %d: tail buffer capacity %d, want ≥ %d", len(segs), c, seg)
			}
		} else if p != ptr {
			moves++
		}
		ptr = p
	}
	if segsSeen < 5 {
		t.Fatalf("only %d segments: the test did not cycle", segsSeen)
	}
	if moves != 0 {
		t.Fatalf("tidwall reallocated its tail buffer %d times within a segment", moves)
	}
	for i, ev := range evs {
		got, err := l.Read(uint64(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := EncodeEntry(ev)
		have, _ := EncodeEntry(got)
		if !bytes.Equal(want, have) {
			t.Fatalf("seq %d reads back differently", i+1)
		}
	}
	// And a reopened log reads the same from disk.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	rd, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range rd.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		want, _ := EncodeEntry(evs[n])
		have, _ := EncodeEntry(ev)
		if !bytes.Equal(want, have) {
			t.Fatalf("seq %d on disk differs", n+1)
		}
		n++
	}
	if n != len(evs) {
		t.Fatalf("%d events on disk, want %d", n, len(evs))
	}
}

package wal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// pieceEvent is an event whose frame is about size bytes.
func pieceEvent(i, size int) *events.Event {
	return events.MustNew(fmt.Sprintf("stream-%d", i%5), &events.WalSalvaged{
		LostSeq: uint64(i), Segment: "piece", Reason: strings.Repeat("p", size) + fmt.Sprint(i),
	})
}

// buildMixedLog writes n events of sizes from 10 bytes to 5 KB (larger
// than the pieces the test reads) into segments of segSize bytes.
func buildMixedLog(t *testing.T, dir string, n, segSize int) {
	t.Helper()
	l, err := Open(Options{Dir: dir, SegmentSize: segSize, Now: fixedNow, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{10, 300, 1500, 5000, 40}
	for i := 0; i < n; i++ {
		if _, err := l.Append(context.Background(), pieceEvent(i, sizes[i%len(sizes)])); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// readOutcome is what Reader.Events yields from from: the seqs and the
// error that ended it.
func readOutcome(t *testing.T, dir string, from uint64) string {
	t.Helper()
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for ev, err := range r.Events(from) {
		if err != nil {
			fmt.Fprintf(&b, "error: %v", err)
			break
		}
		fmt.Fprintf(&b, "%d:%s ", ev.Seq, ev.ID)
	}
	return b.String()
}

// withPiece runs f with readPiece set to n.
func withPiece(n int, f func()) {
	old := readPiece
	readPiece = n
	defer func() { readPiece = old }()
	f()
}

// Reading a segment piece by piece yields what reading it whole does:
// every event from any seq, and the same answer for damage in the middle
// of a segment, damage in the last one with good entries after it, a torn
// tail and preallocated zeros — with frames larger than a piece and frames
// cut by a piece's end.
func TestReaderPiecesEqualWholeSegments(t *testing.T) {
	// A log whose last segment holds several entries.
	var base string
	var segs []segmentFile
	var fr []frameLoc
	var mid, inLast frameLoc
	for n := 120; inLast.len == 0; n++ {
		if n > 160 {
			t.Fatal("no log size left several entries in the last segment")
		}
		base = filepath.Join(t.TempDir(), "wal")
		buildMixedLog(t, base, n, 16<<10)
		var err error
		if segs, err = listSegments(base); err != nil || len(segs) < 4 {
			t.Fatalf("want several segments: %v %v", segs, err)
		}
		fr = frames(t, base)
		mid, inLast = frameLoc{}, frameLoc{}
		for _, f := range fr {
			if f.seg == segs[1].Name && f.len > 1500 && mid.len == 0 {
				mid = f
			}
			if f.seg == segs[len(segs)-1].Name && inLast.len == 0 && f.seq+2 <= uint64(len(fr)) {
				inLast = f
			}
		}
	}
	if mid.len == 0 {
		t.Fatal("no large frame in the second segment")
	}
	cases := []struct {
		name    string
		wantErr bool // reading from seq 1 ends with an error
		damage  func(t *testing.T, dir string)
	}{
		{"clean", false, func(*testing.T, string) {}},
		{"damage mid-log", true, func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, mid.seg), int64(mid.off+mid.len/2), []byte{0x00, 0xff})
		}},
		{"damaged length mid-log", true, func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, mid.seg), int64(mid.off), []byte{0xff, 0xff, 0xff})
		}},
		{"damage in the last segment", true, func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, inLast.seg), int64(inLast.off+inLast.len/2), []byte{0x5a})
		}},
		{"torn tail", false, func(t *testing.T, dir string) {
			if err := appendToTail(dir, []byte{0xf0, 0x01, 0xC1, 0x00}); err != nil {
				t.Fatal(err)
			}
		}},
		{"preallocated zeros", false, func(t *testing.T, dir string) {
			last := filepath.Join(dir, segs[len(segs)-1].Name)
			fi, err := os.Stat(last)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(last, alignUp(fi.Size(), preallocUnit)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	froms := []uint64{1, mid.seq, mid.seq + 1, inLast.seq, uint64(len(fr)), uint64(len(fr)) + 1}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			copyLogDir(t, base, dir)
			c.damage(t, dir)
			for _, from := range froms {
				var whole string
				withPiece(1<<30, func() { whole = readOutcome(t, dir, from) })
				if from == 1 && (strings.Contains(whole, "error:") != c.wantErr || !strings.HasPrefix(whole, "1:")) {
					t.Fatalf("from seq 1 (whole segments): %s", whole)
				}
				for _, piece := range []int{700, 1024, 4096, 5003} {
					withPiece(piece, func() {
						if got := readOutcome(t, dir, from); got != whole {
							t.Fatalf("from %d, pieces of %d bytes:\n%s\nwhole segments:\n%s", from, piece, got, whole)
						}
					})
				}
			}
		})
	}
}

// A read of a few events reads a piece, not the segment: the first event
// of a 4 MiB segment costs at most readPiece bytes, and a read of the
// whole log keeps a buffer of one piece.
func TestReaderReadsAPieceForAFewEvents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := Open(Options{Dir: dir, Now: fixedNow, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30000
	for i := 0; i < n; i += 500 {
		evs := make([]*events.Event, 500)
		for j := range evs {
			evs[j] = testEvent(i + j)
		}
		if _, err := l.Append(context.Background(), evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := Segments(dir)
	if err != nil || len(segs) < 2 || segs[0].Size < 4<<20 {
		t.Fatalf("want a full 4 MiB first segment: %+v %v", segs, err)
	}
	one := func(ev *events.Event, err error) bool { return false }
	c := &cursor{dir: dir, suspect: -1}
	if _, err := c.read(1, 1, true, one); err != nil {
		t.Fatal(err)
	}
	if c.readBytes == 0 || c.readBytes > int64(readPiece) {
		t.Fatalf("reading seq 1 read %d bytes, want at most one piece (%d)", c.readBytes, readPiece)
	}
	c = &cursor{dir: dir, suspect: -1}
	seen := uint64(0)
	if _, err := c.read(1, n, true, func(ev *events.Event, err error) bool {
		seen++
		return err == nil && ev.Seq == seen
	}); err != nil || seen != n {
		t.Fatalf("read %d of %d events: %v", seen, n, err)
	}
	var size int64
	for _, s := range segs {
		size += s.Size
	}
	if c.readBytes < size || cap(c.buf) > readPiece {
		t.Fatalf("a whole read read %d of %d bytes with a buffer of %d (want ≤ %d)", c.readBytes, size, cap(c.buf), readPiece)
	}
}

// A reader following a live log reads it in pieces across preallocated
// zeros (segments of 1 MiB are preallocated) and sees every event once.
func TestReaderFollowsInPieces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: 1 << 20})
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := l.Append(context.Background(), pieceEvent(i, []int{40, 2000, 900}[i%3])); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := uint64(0)
	withPiece(1024, func() {
		for ev, err := range r.Follow(ctx, 1, 2*time.Millisecond) {
			if err != nil {
				t.Fatal(err)
			}
			if got++; ev.Seq != got {
				t.Fatalf("event %d has seq %d", got, ev.Seq)
			}
			if got == n {
				break
			}
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("followed %d events, want %d", got, n)
	}
}

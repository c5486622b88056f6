package wal

// Adversarial tests: edges of the log's contract that the other tests do
// not reach — entries larger than a segment, tiny segments, Close racing
// appenders and other Close calls, a follower under 16 appenders across
// segment cycles, a tail ending exactly at a preallocation unit, faults at
// the Nth seam call, Verify and Stat of a log being written, and Salvage
// of a middle segment.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// blockingSyncWriter holds every Sync until release is closed.
type blockingSyncWriter struct {
	Writer
	entered chan struct{} // one value per Sync that reached the gate
	release chan struct{}
}

func (b *blockingSyncWriter) Sync() error {
	b.entered <- struct{}{}
	<-b.release
	return b.Writer.Sync()
}

// A Close that finds the log already closing must not return before the
// log is closed: its caller may reopen the log at once.
func TestAdvConcurrentCloseReturnsAfterTheLockIsReleased(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := Open(Options{Dir: dir, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	bw := &blockingSyncWriter{Writer: l.w, entered: make(chan struct{}, 64), release: make(chan struct{})}
	l.w = bw // before any append
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), testEvent(1))
		appended <- err
	}()
	<-bw.entered // the group's fsync is held: the first Close waits for it
	firstClosed := make(chan error, 1)
	go func() { firstClosed <- l.Close() }()
	waitFor(t, "the first Close to mark the log closed", func() bool {
		l.sendMu.RLock()
		defer l.sendMu.RUnlock()
		return l.closed
	})
	secondClosed := make(chan error, 1)
	go func() { secondClosed <- l.Close() }()
	select {
	case err := <-secondClosed:
		// It returned while the first Close is still waiting for the
		// fsync: the log is not closed, its lock is still held.
		l2, oerr := Open(Options{Dir: dir, Now: fixedNow})
		if oerr == nil {
			l2.Close()
		}
		close(bw.release)
		<-firstClosed
		t.Fatalf("second Close returned %v while the first was still closing; an Open right after it: %v", err, oerr)
	case <-time.After(200 * time.Millisecond):
	}
	close(bw.release)
	if err := <-appended; err != nil {
		t.Fatalf("append whose fsync Close waited for: %v", err)
	}
	if err := <-firstClosed; err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := <-secondClosed; err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l2, err := Open(Options{Dir: dir, Now: fixedNow})
	if err != nil {
		t.Fatalf("Open after both Close calls returned: %v", err)
	}
	defer l2.Close()
	if l2.LastSeq() != 1 || l2.Repaired() != nil {
		t.Fatalf("reopened: last %d repaired %+v", l2.LastSeq(), l2.Repaired())
	}
	if _, err := l.Append(context.Background(), testEvent(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append on the closed handle: %v", err)
	}
}

// advEvent is a distinct event whose payload carries about size bytes.
func advEvent(i, size int) *events.Event {
	return events.MustNew(fmt.Sprintf("adv-%d", i%5), &events.WalSalvaged{
		LostSeq: uint64(i), Segment: "adv", Reason: strings.Repeat(string(rune('a'+i%26)), size),
	})
}

// advCheckWriter checks, with no append in flight, that the writer's
// mirror of tidwall's tail is the truth: it names the last segment file
// and counts exactly the bytes of its entries. The preallocator zero-fills
// past that count, so a wrong count would put zeros over entries.
func advCheckWriter(t *testing.T, l *Log) {
	t.Helper()
	segs, err := listSegments(l.Dir())
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	last := segs[len(segs)-1]
	b, err := os.ReadFile(filepath.Join(l.Dir(), last.Name))
	if err != nil {
		t.Fatal(err)
	}
	sc := scanSegment(last, b, true, false)
	if len(sc.Bad) != 0 {
		t.Fatalf("tail segment %s: %v", last.Name, sc.Bad)
	}
	if l.tww.seg != last.Name || int64(l.tww.tail) != sc.Size-sc.Prealloc {
		t.Fatalf("writer tracks segment %s with %d bytes; the tail is %s with %d bytes of entries (%d on disk)",
			l.tww.seg, l.tww.tail, last.Name, sc.Size-sc.Prealloc, sc.Size)
	}
	if sc.Next-1 != l.LastSeq() {
		t.Fatalf("tail segment ends at seq %d, LastSeq %d", sc.Next-1, l.LastSeq())
	}
}

// advCheckSegments checks the shape tidwall's cycle rule gives a log
// with segment size segSize: every segment but the last holds at least
// segSize bytes and no more than one frame past it, no zeros, and starts
// at the sequence its name says. It returns the segments.
func advCheckSegments(t *testing.T, dir string, segSize int) []segmentScan {
	t.Helper()
	ds, err := scanDir(dir, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Bad) != 0 {
		t.Fatalf("damage: %v", ds.Bad)
	}
	for i, sc := range ds.Segments[:len(ds.Segments)-1] {
		if sc.Prealloc != 0 || sc.Size < int64(segSize) || sc.Count == 0 {
			t.Fatalf("closed segment %s: %d bytes, %d entries, %d preallocated (segment size %d)", sc.Segment.Name, sc.Size, sc.Count, sc.Prealloc, segSize)
		}
		if lastFrame := sc.Good[len(sc.Good)-1]; lastFrame.Off >= int64(segSize) {
			t.Fatalf("segment %s kept writing past its size: last frame at %d", sc.Segment.Name, lastFrame.Off)
		}
		if next := ds.Segments[i+1].Segment.First; next != sc.Next {
			t.Fatalf("segment %s ends before seq %d, the next is %d", sc.Segment.Name, sc.Next, next)
		}
	}
	return ds.Segments
}

// advReadAll checks every way of reading the log against want (by seq,
// from 1): Log.Events, Log.Read, Reader.Events and Reader.LastSeq.
func advReadAll(t *testing.T, l *Log, want []*events.Event) {
	t.Helper()
	same := func(name string, evs iter.Seq2[*events.Event, error]) {
		t.Helper()
		n := 0
		for ev, err := range evs {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if n >= len(want) || ev.Seq != uint64(n+1) || !bytes.Equal(entryBytes(t, ev), entryBytes(t, want[n])) {
				t.Fatalf("%s: event %d (seq %d) is not the one appended", name, n, ev.Seq)
			}
			n++
		}
		if n != len(want) {
			t.Fatalf("%s yielded %d, want %d", name, n, len(want))
		}
	}
	same("Events", l.Events(1))
	for i, w := range want {
		ev, err := l.Read(uint64(i + 1))
		if err != nil || !bytes.Equal(entryBytes(t, ev), entryBytes(t, w)) {
			t.Fatalf("Read(%d): %v", i+1, err)
		}
	}
	r := mustReader(t, l.Dir())
	same("Reader.Events", r.Events(1))
	if last, err := r.LastSeq(); err != nil || last != uint64(len(want)) {
		t.Fatalf("Reader.LastSeq %d %v, want %d", last, err, len(want))
	}
}

// Entries larger than the segment size, alone and inside batches, with
// preallocation on and off: each such entry fills a segment by itself,
// every way of reading returns the bytes appended, the writer's tail
// mirror stays exact after every append, and the log reopens clean and
// takes more appends.
func TestAdvEntriesLargerThanSegment(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name     string
		segSize  int
		prealloc int
		sizes    []int // payload sizes; a negative size starts a batch of the next three
	}{
		{"512B-prealloc-off", 512, -1, []int{100, 600, 2000, 50, -1, 10, 1500, 10, 700, 30}},
		{"512B-prealloc-asked", 512, mib, []int{600, 100, 100, 100, 100, -1, 511, 512, 513, 5000}},
		{"1MiB-prealloc", mib, mib, []int{200 << 10, mib + 300<<10, 10, 900 << 10, -1, 100, 3 * mib, 100, 500 << 10, 600 << 10, 5}},
		{"1MiB-prealloc-off", mib, -1, []int{mib + 1, 10, -1, 400 << 10, 400 << 10, 400 << 10, 2 * mib}},
		{"1.5MiB-prealloc", mib + mib/2, 0, []int{100 << 10, 2 * mib, 300 << 10, -1, mib, mib, 100, 700 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			opts := Options{Dir: dir, SegmentSize: tc.segSize, Preallocate: tc.prealloc, Now: fixedNow}
			l, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			var want []*events.Event
			for i := 0; i < len(tc.sizes); i++ {
				var batch []*events.Event
				if tc.sizes[i] >= 0 {
					batch = append(batch, advEvent(len(want), tc.sizes[i]))
				} else {
					for _, s := range tc.sizes[i+1 : i+4] {
						batch = append(batch, advEvent(len(want)+len(batch), s))
					}
					i += 3
				}
				seqs, err := l.Append(context.Background(), batch...)
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if len(seqs) != len(batch) || seqs[0] != uint64(len(want)+1) {
					t.Fatalf("append %d: seqs %v after %d events", i, seqs, len(want))
				}
				want = append(want, batch...)
				advCheckWriter(t, l)
			}
			segs := advCheckSegments(t, dir, tc.segSize)
			if len(segs) < 3 {
				t.Fatalf("%d segments", len(segs))
			}
			for _, sc := range segs {
				// An entry of at least the segment size ends its segment.
				for i, g := range sc.Good {
					if g.Len >= int64(tc.segSize) && i != len(sc.Good)-1 {
						t.Fatalf("seq %d (%d bytes) is followed by %d entries in segment %s", g.Seq, g.Len, len(sc.Good)-1-i, sc.Segment.Name)
					}
				}
			}
			advReadAll(t, l, want)
			if rep, err := Verify(dir); err != nil || rep.TornTail != nil || rep.Entries != uint64(len(want)) {
				t.Fatalf("Verify: %+v %v", rep, err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, sc := tailScan(t, dir); sc.Prealloc != 0 || len(sc.Bad) != 0 {
				t.Fatalf("Close left %d zeros, damage %v", sc.Prealloc, sc.Bad)
			}
			l2, err := Open(opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l2.Close()
			if l2.Repaired() != nil || l2.LastSeq() != uint64(len(want)) {
				t.Fatalf("reopened: repaired %+v last %d", l2.Repaired(), l2.LastSeq())
			}
			more := []*events.Event{advEvent(len(want), 2*tc.segSize), advEvent(len(want)+1, 1)}
			if seqs, err := l2.Append(context.Background(), more...); err != nil || seqs[0] != uint64(len(want)+1) {
				t.Fatalf("append after reopen: %v %v", seqs, err)
			}
			want = append(want, more...)
			advCheckWriter(t, l2)
			advReadAll(t, l2, want)
			advCheckSegments(t, dir, tc.segSize)
		})
	}
}

// Segments smaller than one entry, with preallocation asked for and not
// (below 1 MiB it never runs), under 16 concurrent appenders: every entry
// gets a segment of its own, each created segment's directory entry is
// fsynced before its entry is acknowledged (Apply checks it), the log
// ends in an empty segment, and reopens clean.
func TestAdvTinySegmentsSixteenAppenders(t *testing.T) {
	for _, tc := range []struct {
		segSize, prealloc int
	}{{1, -1}, {1, 1 << 20}, {64, 0}, {300, -1}} {
		t.Run(fmt.Sprintf("seg%d-prealloc%d", tc.segSize, tc.prealloc), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			var g *gatedWriter
			var applyErr error
			var applyMu sync.Mutex
			opts := Options{Dir: dir, SegmentSize: tc.segSize, Preallocate: tc.prealloc, Now: fixedNow, Apply: func(evs []*events.Event) error {
				err := g.check(evs)
				if err != nil {
					applyMu.Lock()
					applyErr = cmpOr(applyErr, err)
					applyMu.Unlock()
				}
				return err
			}}
			l, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			g = &gatedWriter{Writer: l.w}
			l.w = g
			const workers, per = 16, 8
			acked := make([][]*events.Event, workers)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						ev := advEvent(w*per+i, 20+(w*per+i)%90)
						seqs, err := l.Append(context.Background(), ev)
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
						if seqs[0] != ev.Seq {
							t.Errorf("seq %d returned, event has %d", seqs[0], ev.Seq)
						}
						acked[w] = append(acked[w], ev)
					}
				}()
			}
			wg.Wait()
			if applyErr != nil {
				t.Fatal(applyErr)
			}
			const n = workers * per
			want := make([]*events.Event, n)
			for _, evs := range acked {
				for _, ev := range evs {
					if ev.Seq == 0 || ev.Seq > n || want[ev.Seq-1] != nil {
						t.Fatalf("seq %d acknowledged twice or out of range", ev.Seq)
					}
					want[ev.Seq-1] = ev
				}
			}
			advCheckWriter(t, l)
			segs := advCheckSegments(t, dir, tc.segSize)
			// Which event got seq 1 depends on scheduling, and sizes vary:
			// one entry per segment only if every frame reaches the size.
			frame := framesLen(t, want[:1])
			for i := range want {
				frame = min(frame, framesLen(t, want[i:i+1]))
			}
			if tc.segSize <= frame {
				// One entry per segment, then the empty segment tidwall
				// opened after the last.
				if len(segs) != n+1 || segs[n].Count != 0 || segs[n].Size != 0 || segs[n].Segment.First != n+1 {
					t.Fatalf("%d segments, the last %+v; want %d of one entry and an empty one", len(segs), segs[len(segs)-1], n)
				}
				for i, sc := range segs[:n] {
					if sc.Count != 1 || sc.Segment.First != uint64(i+1) {
						t.Fatalf("segment %s holds %d entries", sc.Segment.Name, sc.Count)
					}
				}
			}
			advReadAll(t, l, want)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			opts.Apply = nil
			l2, err := Open(opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l2.Close()
			if l2.Repaired() != nil || l2.LastSeq() != n {
				t.Fatalf("reopened: repaired %+v last %d", l2.Repaired(), l2.LastSeq())
			}
			// The empty tail segment takes the next entry.
			more := advEvent(n, 5)
			if seqs, err := l2.Append(context.Background(), more); err != nil || seqs[0] != n+1 {
				t.Fatalf("append after reopen: %v %v", seqs, err)
			}
			advCheckWriter(t, l2)
			advReadAll(t, l2, append(want, more))
			advCheckSegments(t, dir, tc.segSize)
		})
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Reopening a log with another segment size than it was written with:
// a tail segment already past the new size is cycled before the next
// batch (tidwall's rule the writer mirrors), the new segment's directory
// entry is fsynced, and preallocation never zero-fills over entries.
func TestAdvReopenWithAnotherSegmentSize(t *testing.T) {
	const mib = 1 << 20
	dir := filepath.Join(t.TempDir(), "wal")
	var want []*events.Event
	appendSome := func(l *Log, sizes ...int) {
		t.Helper()
		for _, s := range sizes {
			ev := advEvent(len(want), s)
			if seqs, err := l.Append(context.Background(), ev); err != nil || seqs[0] != uint64(len(want)+1) {
				t.Fatalf("append: %v %v", seqs, err)
			}
			want = append(want, ev)
			advCheckWriter(t, l)
		}
	}
	steps := []struct {
		segSize int
		sizes   []int
		cycles  bool // the first append of the step opens a new segment
	}{
		{8 * mib, []int{700 << 10, 800 << 10, 10}, false}, // tail ≈ 1.5 MiB
		{mib, []int{100, 200 << 10, 100}, true},           // 1.5 MiB > 1 MiB: cycle first
		{8 * mib, []int{300 << 10, 10}, false},            // tail ≈ 300 KiB: continue it
		{200 << 10, []int{10, 10}, true},                  // ≈ 300 KiB > 200 KiB
		{3*mib + 12345, []int{mib, mib, mib, 5}, false},
	}
	for i, st := range steps {
		l, err := Open(Options{Dir: dir, SegmentSize: st.segSize, Now: fixedNow})
		if err != nil {
			t.Fatalf("step %d: open: %v", i, err)
		}
		if l.Repaired() != nil || l.LastSeq() != uint64(len(want)) {
			t.Fatalf("step %d: repaired %+v last %d", i, l.Repaired(), l.LastSeq())
		}
		cw := &countingWriter{Writer: l.w}
		l.w = cw
		before, _ := listSegments(dir)
		appendSome(l, st.sizes[0])
		after, _ := listSegments(dir)
		if cycled := len(after) > len(before); cycled != st.cycles || (cw.dirSyncs > 0) != cycled {
			t.Fatalf("step %d: segments %d → %d, %d directory fsyncs, want a cycle: %v", i, len(before), len(after), cw.dirSyncs, st.cycles)
		}
		if st.cycles && (after[len(after)-1].First != uint64(len(want)) || after[len(after)-1].First != after[len(after)-2].First+uint64(advSegmentCount(t, dir, after[len(after)-2]))) {
			t.Fatalf("step %d: new segment %s", i, after[len(after)-1].Name)
		}
		appendSome(l, st.sizes[1:]...)
		advReadAll(t, l, want)
		// A crash image taken now opens to the same events.
		crash := filepath.Join(t.TempDir(), "wal")
		copyLogDir(t, dir, crash)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		lc, err := Open(Options{Dir: crash, SegmentSize: st.segSize, Now: fixedNow, NoSync: true})
		if err != nil {
			t.Fatalf("step %d: crash image: %v", i, err)
		}
		if lc.Repaired() != nil {
			t.Fatalf("step %d: crash image repaired %+v", i, lc.Repaired())
		}
		advReadAll(t, lc, want)
		lc.Close()
	}
	if rep, err := Verify(dir); err != nil || rep.TornTail != nil || rep.Entries != uint64(len(want)) {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
}

// advSegmentCount is the number of entries in segment s of dir.
func advSegmentCount(t *testing.T, dir string, s segmentFile) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, s.Name))
	if err != nil {
		t.Fatal(err)
	}
	return scanSegment(s, b, false, false).Count
}

// advSizedEvent returns an event for seq whose frame is exactly frame
// bytes, its payload ending in zeros bytes of zeros (so that the entry
// does too).
func advSizedEvent(t *testing.T, seq uint64, frame, zeros int) *events.Event {
	t.Helper()
	build := func(n int) *events.Event {
		ev := events.MustNew("adv", &events.WalSalvaged{LostSeq: seq, Segment: "sized", Reason: strings.Repeat("s", n) + strings.Repeat("\x00", zeros)})
		ev.Seq, ev.TS = seq, fixedNow().UnixMilli()
		return ev
	}
	n := 0
	for range 8 {
		ev := build(n)
		got := framesLen(t, []*events.Event{ev})
		if got == frame {
			return ev
		}
		n += frame - got
		if n < 0 {
			break
		}
	}
	t.Fatalf("no event of a %d-byte frame", frame)
	return nil
}

// A tail segment whose entries end exactly at a multiple of the
// preallocation unit, the last entry ending in zero bytes: after Close the
// file is a whole unit whose last bytes are zeros — the shape of
// preallocated space — yet every entry is intact. The log reopens without
// a repair and with the last entry's bytes whole, and so does a crash image
// taken while it was open.
func TestAdvTailEndingAtPreallocUnit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		unit  int // the tail's entries end at this many bytes
		zeros int // zero bytes ending the last entry
	}{
		{"1MiB-short-zeros", preallocUnit, 40},
		{"1MiB-long-zeros", preallocUnit, 9000},
		{"2MiB-long-zeros", 2 * preallocUnit, 70000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "wal")
			opts := Options{Dir: dir, SegmentSize: 4 * preallocUnit, Preallocate: preallocUnit, Now: fixedNow}
			l, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			var want []*events.Event
			size := 0
			for size < tc.unit-(200<<10) {
				ev := advEvent(len(want), 60<<10)
				if _, err := l.Append(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
				want = append(want, ev)
				size += framesLen(t, []*events.Event{ev})
			}
			// Two more: the last ends the entries exactly at the unit.
			half := (tc.unit - size) / 2
			for _, frame := range []int{half, tc.unit - size - half} {
				ev := advSizedEvent(t, uint64(len(want)+1), frame, tc.zeros)
				if seqs, err := l.Append(context.Background(), ev); err != nil || seqs[0] != uint64(len(want)+1) {
					t.Fatalf("append: %v %v", seqs, err)
				}
				want = append(want, ev)
			}
			advCheckWriter(t, l)
			if l.tww.tail != tc.unit {
				t.Fatalf("tail holds %d bytes of entries, want %d", l.tww.tail, tc.unit)
			}
			advReadAll(t, l, want)
			crash := filepath.Join(root, "crash", "wal")
			copyLogDir(t, dir, crash)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			_, closed := tailSegment(t, dir)
			if b := closed; len(b) != tc.unit || trailingZeros(b) < tc.zeros {
				t.Fatalf("after Close the tail is %d bytes ending in %d zeros, want %d ending in at least %d", len(b), trailingZeros(b), tc.unit, tc.zeros)
			}
			for _, d := range []string{dir, crash} {
				if rep, err := Verify(d); err != nil || rep.TornTail != nil || rep.Entries != uint64(len(want)) {
					t.Fatalf("Verify %s: %+v %v", d, rep, err)
				}
				if st, err := Stat(d); err != nil || st.TornTail || st.Damaged != 0 || st.Events != uint64(len(want)) {
					t.Fatalf("Stat %s: %+v %v", d, st, err)
				}
				o := opts
				o.Dir = d
				l2, err := Open(o)
				if err != nil {
					t.Fatalf("reopen %s: %v", d, err)
				}
				if l2.Repaired() != nil || l2.LastSeq() != uint64(len(want)) {
					l2.Close()
					t.Fatalf("reopen %s: repaired %+v last %d", d, l2.Repaired(), l2.LastSeq())
				}
				if _, b := tailSegment(t, d); len(b) < tc.unit || !bytes.Equal(b[:tc.unit], closed) {
					l2.Close()
					t.Fatalf("reopen %s changed the entries", d)
				}
				advReadAll(t, l2, want)
				more := advEvent(len(want), 100)
				if seqs, err := l2.Append(context.Background(), more); err != nil || seqs[0] != uint64(len(want)+1) {
					l2.Close()
					t.Fatalf("append after reopen: %v %v", seqs, err)
				}
				advCheckWriter(t, l2)
				advReadAll(t, l2, append(append([]*events.Event(nil), want...), more))
				if err := l2.Close(); err != nil {
					t.Fatal(err)
				}
				if rep, err := Verify(d); err != nil || rep.TornTail != nil || rep.Entries != uint64(len(want)+1) {
					t.Fatalf("Verify %s after the append: %+v %v", d, rep, err)
				}
			}
		})
	}
}

// nthFault arms a fault of the package's Faults seam just before the nth
// call of one kind reaches it.
type nthFault struct {
	Writer
	faults *Faults
	kind   string // "write", "short", "sync", "dirsync"
	n      int32
	cause  error

	mu    sync.Mutex
	calls map[string]int32
	// written is the highest sequence written to the files: by a
	// WriteBatch that returned nil, or by the whole entries of a short
	// write, whose torn frame is entry torn.
	written, torn uint64
}

func (f *nthFault) count(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[kind]++
	if f.calls[kind] != f.n {
		return
	}
	switch kind {
	case "write":
		if f.kind == "short" {
			f.faults.ShortWrite(f.cause)
		} else if f.kind == "write" {
			f.faults.FailWrite(f.cause)
		}
	case "sync":
		if f.kind == "sync" {
			f.faults.FailSync(f.cause)
		}
	case "dirsync":
		if f.kind == "dirsync" {
			f.faults.FailDirSync(f.cause)
		}
	}
}

func (f *nthFault) WriteBatch(first uint64, e [][]byte) (bool, error) {
	f.count("write")
	cycled, err := f.Writer.WriteBatch(first, e)
	f.mu.Lock()
	defer f.mu.Unlock()
	last := first + uint64(len(e)) - 1
	switch {
	case err == nil:
		f.written = last
	case f.kind == "short":
		f.written, f.torn = last-1, last
	}
	return cycled, err
}
func (f *nthFault) Sync() error    { f.count("sync"); return f.Writer.Sync() }
func (f *nthFault) SyncDir() error { f.count("dirsync"); return f.Writer.SyncDir() }

// The Nth WriteBatch, Sync or directory fsync fails (a write error, a short
// write leaving a torn frame, an fsync error) under 16 appenders on small
// segments. Then: the acknowledged sequences are exactly 1..LastSeq, and
// Apply saw exactly those, in order; every other append failed with the
// cause; nothing past LastSeq is readable from the log. After reopen every
// acknowledged event is there byte for byte, and whatever follows is a
// submitted event (written, never acknowledged), each at most once, or
// the wal.repaired of a torn frame.
func TestAdvFaultAtNthCall(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		n       int32
		cause   error
		segSize int // 1 MiB: preallocated segments
		payload int // bytes per event, about
	}{
		{"write", 1, syscall.ENOSPC, 3000, 40},
		{"write", 19, syscall.EIO, 3000, 40},
		{"short", 1, syscall.ENOSPC, 3000, 40},
		{"short", 13, syscall.ENOSPC, 3000, 40},
		{"short", 31, syscall.EFBIG, 3000, 40},
		{"sync", 1, syscall.EIO, 3000, 40},
		{"sync", 11, syscall.EIO, 3000, 40},
		{"dirsync", 1, syscall.EIO, 3000, 40},
		{"dirsync", 4, syscall.EIO, 3000, 40},
		{"short", 40, syscall.ENOSPC, 1 << 20, 3000},
		{"sync", 30, syscall.EIO, 1 << 20, 3000},
		{"dirsync", 2, syscall.EIO, 1 << 20, 3000},
	} {
		t.Run(fmt.Sprintf("%s-%d-seg%d", tc.kind, tc.n, tc.segSize), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "wal")
			faults := &Faults{}
			var appliedMu sync.Mutex
			var applied []uint64
			l, err := Open(Options{Dir: dir, SegmentSize: tc.segSize, Faults: faults, Now: fixedNow, Apply: func(evs []*events.Event) error {
				appliedMu.Lock()
				defer appliedMu.Unlock()
				for _, ev := range evs {
					applied = append(applied, ev.Seq)
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			nf := &nthFault{Writer: l.w, faults: faults, kind: tc.kind, n: tc.n, cause: tc.cause, calls: map[string]int32{}}
			l.w = nf
			changed := l.Changed()
			const workers, per = 16, 60
			acked := make([][]*events.Event, workers)
			submitted := map[string]*events.Event{}
			var subMu sync.Mutex
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						var batch []*events.Event
						for j := 0; j <= (w+i)%3; j++ {
							batch = append(batch, advEvent(w*1000+i*3+j, tc.payload+(w*per+i)%200))
						}
						subMu.Lock()
						for _, ev := range batch {
							submitted[ev.ID] = ev
						}
						subMu.Unlock()
						seqs, err := l.Append(context.Background(), batch...)
						if err != nil {
							if !errors.Is(err, ErrFailed) || !errors.Is(err, tc.cause) || seqs != nil {
								t.Errorf("failed append: %v %v", seqs, err)
							}
							return
						}
						for k, ev := range batch {
							if ev.Seq != seqs[k] || (k > 0 && seqs[k] != seqs[k-1]+1) {
								t.Errorf("batch seqs %v, events carry %d", seqs, ev.Seq)
							}
						}
						acked[w] = append(acked[w], batch...)
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if faults.Fired() != 1 || !errors.Is(l.Err(), ErrFailed) || !errors.Is(l.Err(), tc.cause) {
				t.Fatalf("fired %d, Err %v: the workload did not reach call %d", faults.Fired(), l.Err(), tc.n)
			}
			last := l.LastSeq()
			bySeq := map[uint64]*events.Event{}
			for _, evs := range acked {
				for _, ev := range evs {
					if bySeq[ev.Seq] != nil {
						t.Fatalf("seq %d acknowledged twice", ev.Seq)
					}
					bySeq[ev.Seq] = ev
				}
			}
			if uint64(len(bySeq)) != last {
				t.Fatalf("%d sequences acknowledged, LastSeq %d", len(bySeq), last)
			}
			for s := uint64(1); s <= last; s++ {
				if bySeq[s] == nil {
					t.Fatalf("seq %d ≤ LastSeq %d was never acknowledged", s, last)
				}
			}
			appliedMu.Lock()
			if uint64(len(applied)) != last {
				t.Fatalf("Apply saw %d events, %d acknowledged", len(applied), last)
			}
			for i, s := range applied {
				if s != uint64(i+1) {
					t.Fatalf("Apply saw seq %d at %d", s, i)
				}
			}
			appliedMu.Unlock()
			if last > 0 {
				select {
				case <-changed:
				default:
					t.Fatal("Changed was not closed although LastSeq grew")
				}
			}
			if _, err := l.Read(last + 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Read past LastSeq of a failed log: %v", err)
			}
			n := uint64(0)
			for ev, err := range l.Events(1) {
				if err != nil {
					t.Fatalf("Events of the failed log: %v", err)
				}
				n++
				if ev.Seq != n || !bytes.Equal(entryBytes(t, ev), entryBytes(t, bySeq[n])) {
					t.Fatalf("Events of the failed log: seq %d at %d differs", ev.Seq, n)
				}
			}
			if n != last {
				t.Fatalf("Events of the failed log yielded %d, LastSeq %d", n, last)
			}
			if _, err := l.Append(context.Background(), testEvent(1)); !errors.Is(err, ErrFailed) {
				t.Fatalf("append after the failure: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close of the failed log: %v", err)
			}

			l2, err := Open(Options{Dir: dir, SegmentSize: tc.segSize, Now: fixedNow})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l2.Close()
			seen := map[string]bool{}
			prev := uint64(0)
			var extra, repairedAt uint64
			for ev, err := range l2.Events(1) {
				if err != nil {
					t.Fatalf("reopened: %v", err)
				}
				if ev.Seq != prev+1 {
					t.Fatalf("reopened: seq %d after %d", ev.Seq, prev)
				}
				prev = ev.Seq
				if ev.Seq <= last {
					if !bytes.Equal(entryBytes(t, ev), entryBytes(t, bySeq[ev.Seq])) {
						t.Fatalf("acknowledged seq %d changed or lost", ev.Seq)
					}
					seen[ev.ID] = true
					continue
				}
				if ev.Type == events.TypeWalRepaired {
					repairedAt = ev.Seq
					continue
				}
				if repairedAt != 0 {
					t.Fatalf("seq %d follows the wal.repaired event", ev.Seq)
				}
				sub := submitted[ev.ID]
				if sub == nil || seen[ev.ID] {
					t.Fatalf("seq %d (%s) was never submitted, or twice in the log", ev.Seq, ev.ID)
				}
				seen[ev.ID] = true
				w := *sub
				w.Seq = ev.Seq
				if !bytes.Equal(entryBytes(t, ev), entryBytes(t, &w)) {
					t.Fatalf("unacknowledged seq %d is not the submitted event", ev.Seq)
				}
				extra++
			}
			if prev < last || l2.LastSeq() != prev {
				t.Fatalf("reopened: events end at %d, LastSeq %d, acknowledged %d", prev, l2.LastSeq(), last)
			}
			// The process kept its page cache: exactly what was written
			// survives, the torn frame of a short write is cut.
			nf.mu.Lock()
			written, torn := nf.written, nf.torn
			nf.mu.Unlock()
			if last+extra != written {
				t.Fatalf("reopened log holds entries up to %d, the files were written up to %d", last+extra, written)
			}
			if r := l2.Repaired(); (tc.kind == "short") != (r != nil) || (repairedAt != 0) != (r != nil) || (r != nil && (r.FirstSeq != torn || repairedAt != torn)) {
				t.Fatalf("repair %+v (event at %d) after a %s fault; the torn entry was seq %d", r, repairedAt, tc.kind, torn)
			}
			if _, err := l2.Append(context.Background(), testEvent(7)); err != nil {
				t.Fatalf("append after reopen: %v", err)
			}
			if rep, err := Verify(dir); err != nil || rep.TornTail != nil {
				t.Fatalf("Verify after reopen: %+v %v", rep, err)
			}
			t.Logf("%d acknowledged, %d written but unacknowledged found after reopen", last, extra)
		})
	}
}

// gatedWriteWriter holds the first WriteBatch until release is closed.
type gatedWriteWriter struct {
	Writer
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gatedWriteWriter) WriteBatch(first uint64, e [][]byte) (bool, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.Writer.WriteBatch(first, e)
}

// advReopenHolds reopens the closed log in dir and checks that it holds
// exactly the acknowledged events (by seq, byte for byte): after a clean
// Close every written group was acknowledged, and nothing an append was
// refused for (a context error, ErrClosed) was written.
func advReopenHolds(t *testing.T, dir string, acked map[uint64]*events.Event) {
	t.Helper()
	l, err := Open(Options{Dir: dir, Now: fixedNow, NoSync: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer l.Close()
	if l.Repaired() != nil || l.LastSeq() != uint64(len(acked)) {
		t.Fatalf("reopened: repaired %+v, LastSeq %d, %d acknowledged", l.Repaired(), l.LastSeq(), len(acked))
	}
	n := 0
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		w := acked[ev.Seq]
		if w == nil || !bytes.Equal(entryBytes(t, ev), entryBytes(t, w)) {
			t.Fatalf("seq %d in the log was not acknowledged as this event", ev.Seq)
		}
	}
	if n != len(acked) {
		t.Fatalf("%d events in the log, %d acknowledged", n, len(acked))
	}
}

// Appends blocked on a full queue whose context is cancelled while Close
// waits for them: each returns the context's error and writes nothing;
// every queued append is answered (acknowledged, or ErrClosed if Close
// came first), and the reopened log holds exactly the acknowledged ones.
func TestAdvCancelledAppendsRacingClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := Open(Options{Dir: dir, Now: fixedNow, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedWriteWriter{Writer: l.w, entered: make(chan struct{}), release: make(chan struct{})}
	l.w = g
	type result struct {
		ev   *events.Event
		seqs []uint64
		err  error
	}
	results := make(chan result, 2048)
	appendOne := func(ctx context.Context, ev *events.Event) {
		seqs, err := l.Append(ctx, ev)
		results <- result{ev, seqs, err}
	}
	go appendOne(context.Background(), advEvent(0, 30))
	<-g.entered // the committer holds the first group in its WriteBatch
	queueCap := cap(l.reqs)
	const blocked = 40
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 1; i <= queueCap+blocked; i++ {
		go appendOne(ctx, advEvent(i, 30))
	}
	waitFor(t, "a full queue and appenders blocked on it", func() bool {
		return len(l.reqs) == queueCap && l.queued.Load() == int64(1+queueCap+blocked)
	})
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	waitFor(t, "Close to wait for the blocked appenders", func() bool {
		if l.sendMu.TryRLock() {
			l.sendMu.RUnlock()
			return false
		}
		return true
	})
	cancel()
	acked := map[uint64]*events.Event{}
	var canceled, refused int
	for i := 0; i < blocked; i++ {
		r := <-results // the blocked ones answer first: nothing else can move
		if !errors.Is(r.err, context.Canceled) || r.seqs != nil {
			t.Fatalf("append blocked on the full queue: %v %v", r.seqs, r.err)
		}
		canceled++
	}
	close(g.release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i := 0; i < 1+queueCap; i++ {
		r := <-results
		switch {
		case r.err == nil:
			if len(r.seqs) != 1 || r.seqs[0] != r.ev.Seq || acked[r.ev.Seq] != nil {
				t.Fatalf("acknowledged %v, event seq %d", r.seqs, r.ev.Seq)
			}
			acked[r.ev.Seq] = r.ev
		case errors.Is(r.err, ErrClosed):
			refused++
		default:
			t.Fatalf("queued append: %v", r.err)
		}
	}
	if len(acked) == 0 {
		t.Fatal("the group held in WriteBatch was not acknowledged")
	}
	t.Logf("%d acknowledged, %d refused by Close, %d cancelled", len(acked), refused, canceled)
	advReopenHolds(t, dir, acked)
}

// Appenders with contexts cancelled at random moments race several Close
// calls: every Append either succeeds, or fails with ErrClosed or its
// context's error; every Close returns nil after the log is closed; the
// reopened log holds exactly the acknowledged events.
func TestAdvAppendsWithCancelledContextsRaceClose(t *testing.T) {
	for round := 0; round < 6; round++ {
		dir := filepath.Join(t.TempDir(), "wal")
		l, err := Open(Options{Dir: dir, Now: fixedNow, SegmentSize: 2048})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		acked := map[uint64]*events.Event{}
		var wg sync.WaitGroup
		defer func() { l.Close(); wg.Wait() }() // on every path: the appenders end at ErrClosed
		start := make(chan struct{})
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; ; i++ {
					ctx, cancel := context.WithCancel(context.Background())
					switch (w + i + round) % 4 {
					case 0:
						cancel() // cancelled before the call
					case 1:
						go cancel() // cancelled during it
					}
					evs := []*events.Event{advEvent(w*10000+i*2, 20)}
					if i%3 == 0 {
						evs = append(evs, advEvent(w*10000+i*2+1, 20))
					}
					seqs, err := l.Append(ctx, evs...)
					cancel()
					switch {
					case err == nil:
						mu.Lock()
						for k, ev := range evs {
							if seqs[k] != ev.Seq || acked[ev.Seq] != nil {
								mu.Unlock()
								t.Errorf("seq %d acknowledged twice or not the event's", seqs[k])
								return
							}
							acked[ev.Seq] = ev
						}
						mu.Unlock()
					case errors.Is(err, ErrClosed):
						return
					case errors.Is(err, context.Canceled):
					default:
						t.Errorf("append: %v", err)
						return
					}
				}
			}()
		}
		close(start)
		waitFor(t, "some appends", func() bool { return l.LastSeq() >= 20 })
		closes := make(chan error, 3)
		var reopenMu sync.Mutex // the checks' own Opens take turns
		for range 3 {
			go func() {
				err := l.Close()
				if err == nil {
					// Whichever Close returns, the lock is free.
					reopenMu.Lock()
					defer reopenMu.Unlock()
					if l2, oerr := Open(Options{Dir: dir, NoSync: true}); oerr == nil {
						l2.Close()
					} else if errors.Is(oerr, ErrLocked) {
						err = fmt.Errorf("the lock is still held after Close returned: %w", oerr)
					}
				}
				closes <- err
			}()
		}
		wg.Wait()
		for range 3 {
			if err := <-closes; err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
		}
		if t.Failed() {
			return
		}
		for range 3 {
			if _, err := l.Append(context.Background(), testEvent(1)); !errors.Is(err, ErrClosed) {
				t.Fatalf("append after Close: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close again: %v", err)
			}
		}
		advReopenHolds(t, dir, acked)
	}
}

// A Reader following the log from another goroutine and a live cursor
// over Log.Events (woken by Changed) read every entry, in order and byte
// for byte, while 16 appenders write across several segment cycles —
// with small segments, and with preallocated ones.
func TestAdvFollowersUnderSixteenAppenders(t *testing.T) {
	for _, tc := range []struct {
		name             string
		segSize, payload int
		per              int
	}{
		{"8KiB-segments", 8 << 10, 150, 40},
		{"1MiB-preallocated", 1 << 20, 5000, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			l := openT(t, Options{Dir: dir, SegmentSize: tc.segSize, Preallocate: 1 << 20, Now: fixedNow})
			const workers = 16
			n := workers * tc.per
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			type followed struct {
				evs []*events.Event
				err error
			}
			r := mustReader(t, dir)
			viaReader := make(chan followed, 1)
			go func() {
				var f followed
				for ev, err := range r.Follow(ctx, 1, time.Millisecond) {
					if err != nil {
						f.err = err
						break
					}
					f.evs = append(f.evs, ev)
					if len(f.evs) == n {
						break
					}
				}
				viaReader <- f
			}()
			viaEvents := make(chan followed, 1)
			go func() {
				var f followed
				next := uint64(1)
				for next <= uint64(n) {
					changed := l.Changed()
					for ev, err := range l.Events(next) {
						if err != nil {
							f.err = err
							viaEvents <- f
							return
						}
						f.evs = append(f.evs, ev)
						next = ev.Seq + 1
					}
					if next > uint64(n) {
						break
					}
					select {
					case <-changed:
					case <-ctx.Done():
						f.err = ctx.Err()
						viaEvents <- f
						return
					}
				}
				viaEvents <- f
			}()

			var mu sync.Mutex
			bySeq := map[uint64]*events.Event{}
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < tc.per; i++ {
						ev := advEvent(w*tc.per+i, tc.payload+i*7%300)
						seqs, err := l.Append(context.Background(), ev)
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
						mu.Lock()
						bySeq[seqs[0]] = ev
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if segs, _ := listSegments(dir); len(segs) < 4 {
				t.Fatalf("%d segments: the workload did not cycle", len(segs))
			}
			for name, ch := range map[string]chan followed{"Reader.Follow": viaReader, "Log.Events": viaEvents} {
				f := <-ch
				if f.err != nil {
					t.Fatalf("%s: after %d events: %v", name, len(f.evs), f.err)
				}
				if len(f.evs) != n {
					t.Fatalf("%s read %d events, want %d", name, len(f.evs), n)
				}
				for i, ev := range f.evs {
					w := bySeq[uint64(i+1)]
					if ev.Seq != uint64(i+1) || w == nil || !bytes.Equal(entryBytes(t, ev), entryBytes(t, w)) {
						t.Fatalf("%s: event %d (seq %d) is not the one appended", name, i, ev.Seq)
					}
				}
			}
		})
	}
}

// Verify, Stat and Reader.LastSeq of a log that 16 appenders are writing
// (they read without the lock, as `cmlab wal verify|stat` do next to the
// daemon): never damage, never an error, and never behind what the log
// has acknowledged.
func TestAdvVerifyAndStatWhileWriting(t *testing.T) {
	for _, tc := range []struct {
		name             string
		segSize, payload int
	}{
		{"4KiB-segments", 4 << 10, 100},
		{"1MiB-preallocated", 1 << 20, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			l := openT(t, Options{Dir: dir, SegmentSize: tc.segSize, Preallocate: 1 << 20, Now: fixedNow})
			// The appenders go on until both they have appended per events
			// each and the checks below have run minChecks times, so that
			// the checks overlap the appends however fast the disk is.
			const workers, per, minChecks = 16, 40, 5
			var checked, appended atomic.Int64
			done := make(chan struct{})
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per || checked.Load() < minChecks; i++ {
						if _, err := l.Append(context.Background(), advEvent(w*100000+i, tc.payload)); err != nil {
							t.Errorf("append: %v", err)
							return
						}
						appended.Add(1)
					}
				}()
			}
			go func() { wg.Wait(); close(done) }()
			defer func() { checked.Store(1 << 30); <-done }() // before Close
			r := mustReader(t, dir)
			checks := 0
			for finished := false; !finished; checks++ {
				select {
				case <-done:
					finished = true // one more round on the finished log
				default:
				}
				acked := l.LastSeq()
				rep, err := Verify(dir)
				if err != nil || len(rep.Bad) != 0 || rep.First != 1 || rep.Last < acked || rep.Entries != rep.Last {
					t.Fatalf("check %d: Verify with %d acknowledged: %+v %v", checks, acked, rep, err)
				}
				st, err := Stat(dir)
				var byType uint64
				for _, c := range st.ByType {
					byType += c
				}
				if err != nil || st.Damaged != 0 || st.Last < acked || st.Events != st.Last || byType != st.Events {
					t.Fatalf("check %d: Stat with %d acknowledged: %+v %v", checks, acked, st, err)
				}
				if last, err := r.LastSeq(); err != nil || last < acked {
					t.Fatalf("check %d: Reader.LastSeq %d %v with %d acknowledged", checks, last, err, acked)
				}
				checked.Add(1)
			}
			if t.Failed() {
				return
			}
			rep, err := Verify(dir)
			if err != nil || rep.TornTail != nil || rep.Last != uint64(appended.Load()) || rep.Last < workers*per {
				t.Fatalf("Verify at the end: %+v %v", rep, err)
			}
		})
	}
}

// Damage confined to the middle segment of a log (segments 1-3, 4-6, 7-9
// and 10): Open refuses naming segment, offset and sequence and changes
// nothing; Verify reports exactly that stretch; Salvage quarantines
// exactly the damaged bytes, puts a placeholder at each lost sequence,
// rewrites only that segment, and the log then verifies and opens clean
// with every intact entry byte for byte.
func TestAdvSalvageMiddleSegment(t *testing.T) {
	src := t.TempDir()
	evs := buildLog(t, src, 10, 700)
	fr := frames(t, filepath.Join(src, "wal"))
	orig := snapshot(t, filepath.Join(src, "wal"))
	mid := segmentName(4)
	at := map[uint64]frameLoc{}
	for _, f := range fr {
		at[f.seq] = f
	}
	if at[4].seg != mid || at[6].seg != mid || at[7].seg != segmentName(7) || len(orig) != 4 {
		t.Fatalf("test setup: unexpected layout %v", fr)
	}
	frameOf := func(seq uint64) []byte { f := at[seq]; return orig[f.seg][f.off : f.off+f.len] }
	junk := bytes.Repeat([]byte{0xEE}, 17)
	for _, tc := range []struct {
		name    string
		damage  func(seg []byte) []byte // returns the middle segment's new bytes
		bad     BadEntry                // what Verify reports (Length -1: not checked)
		lost    []uint64
		dropped int
		quar    func(seg []byte) [][]byte // the quarantined bytes, given the damaged segment
	}{
		{
			name:   "truncated-inside-a-frame",
			damage: func(b []byte) []byte { return b[:at[5].off+10] },
			bad:    BadEntry{Segment: mid, Offset: int64(at[5].off), Length: 10, Seq: 5, Lost: 2, Reason: ReasonIncomplete},
			lost:   []uint64{5, 6},
			quar:   func(b []byte) [][]byte { return [][]byte{b[at[5].off:]} },
		},
		{
			name:   "zeroed-whole",
			damage: func(b []byte) []byte { return make([]byte, len(b)) },
			bad:    BadEntry{Segment: mid, Offset: 0, Length: int64(len(orig[mid])), Seq: 4, Lost: 3, Reason: ReasonZeroFill},
			lost:   []uint64{4, 5, 6},
			quar:   func(b []byte) [][]byte { return [][]byte{b} },
		},
		{
			name:   "emptied",
			damage: func(b []byte) []byte { return nil },
			bad:    BadEntry{Segment: mid, Offset: 0, Length: 0, Seq: 4, Lost: 3, Reason: ReasonMissing},
			lost:   []uint64{4, 5, 6},
			quar:   func([]byte) [][]byte { return nil },
		},
		{
			name: "frame-cut-out",
			damage: func(b []byte) []byte {
				return append(bytes.Clone(b[:at[5].off]), b[at[6].off:]...)
			},
			bad:  BadEntry{Segment: mid, Offset: int64(at[5].off), Length: 0, Seq: 5, Lost: 1, Reason: ReasonMissing},
			lost: []uint64{5},
			quar: func([]byte) [][]byte { return nil },
		},
		{
			name:    "junk-appended",
			damage:  func(b []byte) []byte { return append(bytes.Clone(b), junk...) },
			bad:     BadEntry{Segment: mid, Offset: int64(len(orig[mid])), Length: int64(len(junk)), Seq: 7, Lost: 0, Reason: ReasonBadLength},
			dropped: 1,
			quar:    func([]byte) [][]byte { return [][]byte{junk} },
		},
		{
			name: "frame-duplicated",
			damage: func(b []byte) []byte {
				out := bytes.Clone(b[:at[5].off])
				out = append(out, frameOf(4)...)
				return append(out, b[at[5].off:]...)
			},
			bad:     BadEntry{Segment: mid, Offset: int64(at[5].off), Length: int64(at[4].len), Seq: 5, Lost: 0, Reason: ReasonSeq},
			dropped: 1,
			quar:    func([]byte) [][]byte { return [][]byte{frameOf(4)} },
		},
		{
			name: "length-prefix-runs-past-the-end",
			damage: func(b []byte) []byte {
				out := bytes.Clone(b)
				out[at[5].off], out[at[5].off+1] = 0xff, 0x7f
				return out
			},
			// The scan finds seq 6 again after the bad frame: only 5 is lost.
			bad:  BadEntry{Segment: mid, Offset: int64(at[5].off), Length: int64(at[5].len), Seq: 5, Lost: 1, Reason: ReasonIncomplete},
			lost: []uint64{5},
			quar: func(b []byte) [][]byte { return [][]byte{b[at[5].off : at[5].off+at[5].len]} },
		},
		{
			name: "crc-of-the-last-entry",
			damage: func(b []byte) []byte {
				out := bytes.Clone(b)
				out[at[6].off+at[6].len-1] ^= 0x01
				return out
			},
			bad:  BadEntry{Segment: mid, Offset: int64(at[6].off), Length: int64(at[6].len), Seq: 6, Lost: 1, Reason: ReasonBadCRC},
			lost: []uint64{6},
			quar: func(b []byte) [][]byte { return [][]byte{b[at[6].off:]} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			for n, b := range orig {
				files[n] = bytes.Clone(b)
			}
			files[mid] = tc.damage(files[mid])
			home := restore(t, files)
			dir, qdir := filepath.Join(home, "wal"), filepath.Join(home, "quarantine")

			rep, err := Verify(dir)
			var ce *CorruptError
			if !errors.As(err, &ce) || len(rep.Bad) != 1 || rep.TornTail != nil {
				t.Fatalf("Verify: %v, bad %v, torn %v", err, rep.Bad, rep.TornTail)
			}
			if rep.Bad[0] != tc.bad {
				t.Fatalf("Verify reports %+v, want %+v", rep.Bad[0], tc.bad)
			}
			_, err = Open(Options{Dir: dir, NoSync: true})
			where := fmt.Sprintf("segment %s offset %d seq %d", tc.bad.Segment, tc.bad.Offset, tc.bad.Seq)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(fmt.Sprint(err), where) {
				t.Fatalf("Open: %v, want ErrCorrupt naming %q", err, where)
			}
			if after := snapshot(t, dir); len(after) != len(files) || !bytes.Equal(after[mid], files[mid]) {
				t.Fatal("the refused Open changed the segments")
			}
			if len(quarantined(t, home)) != 0 {
				t.Fatal("the refused Open quarantined bytes")
			}

			srep, err := Salvage(dir, qdir)
			if err != nil {
				t.Fatalf("Salvage: %v", err)
			}
			var lost []uint64
			for _, le := range srep.Lost {
				lost = append(lost, le.Seq)
				if le.Segment != mid || le.Offset != tc.bad.Offset || le.Length != tc.bad.Length || le.Reason != tc.bad.Reason {
					t.Fatalf("lost entry %+v does not describe the damage %+v", le, tc.bad)
				}
			}
			if !equalSeqs(lost, tc.lost) || len(srep.Dropped) != tc.dropped {
				t.Fatalf("Salvage lost %v dropped %v, want %v and %d", lost, srep.Dropped, tc.lost, tc.dropped)
			}
			if len(srep.Rewritten) != 1 || srep.Rewritten[0] != mid {
				t.Fatalf("rewritten %v, want only %s", srep.Rewritten, mid)
			}
			wantQ := tc.quar(files[mid])
			q := quarantined(t, home)
			if len(srep.Quarantined) != len(wantQ) || len(q) != len(wantQ) {
				t.Fatalf("quarantined %v (%d files), want %d", srep.Quarantined, len(q), len(wantQ))
			}
			for i, name := range srep.Quarantined {
				if !bytes.Equal(q[name], wantQ[i]) {
					t.Fatalf("quarantine %s holds %d bytes, want the %d damaged bytes", name, len(q[name]), len(wantQ[i]))
				}
			}
			after := snapshot(t, dir)
			for name, b := range orig {
				if name != mid && !bytes.Equal(after[name], b) {
					t.Fatalf("Salvage changed the intact segment %s", name)
				}
			}
			if v, err := Verify(dir); err != nil || v.Entries != 10 || v.TornTail != nil {
				t.Fatalf("Verify after Salvage: %+v %v", v, err)
			}
			l, err := Open(Options{Dir: dir, NoSync: true})
			if err != nil {
				t.Fatalf("Open after Salvage: %v", err)
			}
			defer l.Close()
			if l.Repaired() != nil || l.LastSeq() != 10 {
				t.Fatalf("after Salvage: repaired %+v last %d", l.Repaired(), l.LastSeq())
			}
			isLost := map[uint64]bool{}
			for _, s := range tc.lost {
				isLost[s] = true
			}
			n := 0
			for ev, err := range l.Events(1) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if isLost[ev.Seq] {
					p, err := events.DecodeAs[*events.WalSalvaged](ev)
					if err != nil || ev.Type != events.TypeWalSalvaged || ev.Stream != "wal" || p.LostSeq != ev.Seq || p.Segment != mid {
						t.Fatalf("placeholder at %d: %+v %v", ev.Seq, p, err)
					}
					continue
				}
				if !bytes.Equal(entryBytes(t, ev), entryBytes(t, evs[ev.Seq-1])) {
					t.Fatalf("intact seq %d changed", ev.Seq)
				}
			}
			if n != 10 {
				t.Fatalf("%d events after Salvage", n)
			}
			l.Close()
			if again, err := Salvage(dir, qdir); err != nil || len(again.Lost) != 0 || len(again.Rewritten) != 0 || len(again.Dropped) != 0 {
				t.Fatalf("second Salvage: %+v %v", again, err)
			}
		})
	}
}

// A crash image of a preallocated log (zeros ending its last segment)
// with one entry of a middle segment damaged: Salvage replaces just that
// entry and leaves the last segment alone; Open then trims the zeros
// without a repair.
func TestAdvSalvageMiddleSegmentOfPreallocatedCrashImage(t *testing.T) {
	root := t.TempDir()
	l := openT(t, Options{Dir: filepath.Join(root, "wal"), SegmentSize: 1 << 20})
	var evs []*events.Event
	for i := 0; i < 36; i++ {
		ev := advEvent(i, 100<<10)
		if _, err := l.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	crash := filepath.Join(root, "crash", "wal")
	copyLogDir(t, filepath.Join(root, "wal"), crash)
	segs, _ := listSegments(crash)
	lastPath, lastBytes, lastScan := tailScan(t, crash)
	if len(segs) < 3 || lastScan.Prealloc == 0 {
		t.Fatalf("test setup: %d segments, %d preallocated bytes in the last", len(segs), lastScan.Prealloc)
	}
	mid := segs[1]
	var target goodEntry
	if _, err := scanDir(crash, true, func(sc *segmentScan, _ []byte) error {
		if sc.Segment == mid {
			target = sc.Good[1]
		}
		return nil
	}); err != nil || target.Seq == 0 {
		t.Fatalf("scan: %v", err)
	}
	writeAt(t, filepath.Join(crash, mid.Name), target.Off+target.Len/2, []byte{0x5a, 0xa5})
	if _, err := Open(Options{Dir: crash, NoSync: true}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("segment %s offset %d seq %d", mid.Name, target.Off, target.Seq)) {
		t.Fatalf("Open: %v", err)
	}
	rep, err := Salvage(crash, filepath.Join(root, "crash", "quarantine"))
	if err != nil || len(rep.Lost) != 1 || rep.Lost[0].Seq != target.Seq || len(rep.Rewritten) != 1 || rep.Rewritten[0] != mid.Name {
		t.Fatalf("Salvage: %+v %v", rep, err)
	}
	if b, err := os.ReadFile(lastPath); err != nil || !bytes.Equal(b, lastBytes) {
		t.Fatalf("Salvage changed the last segment (%v)", err)
	}
	l2, err := Open(Options{Dir: crash, SegmentSize: 1 << 20, Now: fixedNow})
	if err != nil {
		t.Fatalf("Open after Salvage: %v", err)
	}
	defer l2.Close()
	if l2.Repaired() != nil || l2.LastSeq() != uint64(len(evs)) {
		t.Fatalf("repaired %+v last %d", l2.Repaired(), l2.LastSeq())
	}
	n := 0
	for ev, err := range l2.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if ev.Seq == target.Seq {
			if ev.Type != events.TypeWalSalvaged {
				t.Fatalf("seq %d is %s, want the placeholder", ev.Seq, ev.Type)
			}
		} else if !bytes.Equal(entryBytes(t, ev), entryBytes(t, evs[ev.Seq-1])) {
			t.Fatalf("seq %d changed", ev.Seq)
		}
	}
	if n != len(evs) {
		t.Fatalf("%d events", n)
	}
}

// Every cut Open makes is recorded, even when recording one failed. Open
// cuts a torn tail and appends wal.repaired; when that write fails
// (nothing written, a short write leaving half the event's frame, an
// fsync error) Open fails, and the next Open must still leave a
// wal.repaired event naming every file the cuts put in quarantine — the
// original torn bytes included, not only the half-written event that the
// next Open cuts from the same offset.
func TestAdvEveryCutRecordedAfterFailedRepairRecords(t *testing.T) {
	for _, tc := range []struct {
		name    string
		segSize int
		fails   []string // the faults armed for consecutive failing Opens
	}{
		{"write", 1 << 20, []string{"write"}},
		{"sync", 1 << 20, []string{"sync"}},
		{"short-preallocated", 1 << 20, []string{"short"}},
		{"short", 4 << 10, []string{"short"}},
		{"short-twice", 4 << 10, []string{"short", "short"}},
		{"short-three-times-preallocated", 1 << 20, []string{"short", "short", "short"}},
		{"write-short-sync", 1 << 20, []string{"write", "short", "sync"}},
		{"short-then-write", 1 << 20, []string{"short", "write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			evs := buildLog(t, home, 4, tc.segSize)
			dir := filepath.Join(home, "wal")
			torn := []byte{0xd0, 0x01, 0xC1, 0x12, 0x34}
			if err := appendToTail(dir, torn); err != nil {
				t.Fatal(err)
			}
			for i, kind := range tc.fails {
				f := &Faults{}
				switch kind {
				case "write":
					f.FailWrite(syscall.ENOSPC)
				case "short":
					f.ShortWrite(syscall.ENOSPC)
				case "sync":
					f.FailSync(syscall.EIO)
				}
				if l, err := Open(Options{Dir: dir, SegmentSize: tc.segSize, Faults: f, Now: fixedNow}); err == nil || f.Fired() != 1 {
					if err == nil {
						l.Close()
					}
					t.Fatalf("open %d with a %s fault on the repair record: %v (fired %d)", i, kind, err, f.Fired())
				}
			}
			l := openT(t, Options{Dir: dir, SegmentSize: tc.segSize, Now: fixedNow})
			q := quarantined(t, home)
			firstCut := segmentName(1) + "-at-" + fmt.Sprint(framesLen(t, evs)) + ".torn"
			if !bytes.Equal(q[firstCut], torn) {
				t.Fatalf("quarantine %v: %s does not hold the torn bytes", q, firstCut)
			}
			recorded := map[string]bool{}
			n := 0
			for ev, err := range l.Events(1) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if ev.Seq <= uint64(len(evs)) {
					if !bytes.Equal(entryBytes(t, ev), entryBytes(t, evs[ev.Seq-1])) {
						t.Fatalf("seq %d changed", ev.Seq)
					}
					continue
				}
				r, err := events.DecodeAs[*events.WalRepaired](ev)
				if err != nil || ev.Type != events.TypeWalRepaired {
					t.Fatalf("seq %d after the entries is %s (%v), want wal.repaired", ev.Seq, ev.Type, err)
				}
				if recorded[r.Quarantine] {
					t.Fatalf("%s recorded twice", r.Quarantine)
				}
				if r.FirstSeq <= uint64(len(evs)) || r.FirstSeq > ev.Seq {
					t.Fatalf("seq %d records a cut whose first lost seq is %d", ev.Seq, r.FirstSeq)
				}
				if b, ok := q[r.Quarantine]; !ok || int64(len(b)) != r.Length {
					t.Fatalf("seq %d records %+v; the quarantine holds %d bytes under that name (%v)", ev.Seq, r, len(b), ok)
				}
				recorded[r.Quarantine] = true
			}
			for name := range q {
				if !recorded[name] {
					t.Errorf("quarantine file %s is recorded by no wal.repaired event (recorded: %v)", name, recorded)
				}
			}
			if l.Repaired() == nil && n == len(evs)+1 && tc.fails[len(tc.fails)-1] != "sync" {
				t.Fatalf("the last Open recorded nothing itself")
			}
			if rep, err := Verify(dir); err != nil || rep.TornTail != nil || rep.Last != l.LastSeq() {
				t.Fatalf("Verify: %+v %v", rep, err)
			}
		})
	}
}

// cmlab cuts the front of its log only by compaction, which records it in
// wal/MANIFEST, so a log without one whose first segment is not
// 00000000000000000001 has lost its front or its manifest: Verify and Stat
// report it (ReasonNoManifest), Open refuses naming segment, offset and
// sequence, both as ErrBadManifest. Salvage refuses it (issue 27: an
// archive may hold that front, and placeholders would replace it) and
// changes nothing; RepairManifest is the way: with the archive, or with
// Deleted when the front is gone, recording it as deleted.
func TestAdvMissingFirstSegments(t *testing.T) {
	for _, tc := range []struct {
		name    string
		removed []uint64 // first seqs of the removed segments
	}{
		{"first", []uint64{1}},
		{"first-two", []uint64{1, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			evs := buildLog(t, home, 10, 700) // segments 1-3, 4-6, 7-9, 10
			dir := filepath.Join(home, "wal")
			for _, s := range tc.removed {
				if err := os.Remove(filepath.Join(dir, segmentName(s))); err != nil {
					t.Fatal(err)
				}
			}
			lost := uint64(3 * len(tc.removed))
			want := BadEntry{Segment: segmentName(1), Offset: 0, Seq: 1, Lost: lost, Reason: ReasonNoManifest}
			rep, err := Verify(dir)
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrBadManifest) || len(rep.Bad) != 1 || rep.Bad[0] != want {
				t.Fatalf("Verify: %v, bad %+v, want %+v", err, rep.Bad, want)
			}
			if st, err := Stat(dir); err != nil || st.Damaged != 1 {
				t.Fatalf("Stat: damaged %d, %v", st.Damaged, err)
			}
			if _, err := Open(Options{Dir: dir, NoSync: true}); !errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), "segment "+segmentName(1)+" offset 0 seq 1") {
				t.Fatalf("Open: %v", err)
			}
			before := segmentNames(t, dir)
			if srep, err := Salvage(dir, filepath.Join(home, "quarantine")); !errors.Is(err, ErrBadManifest) || len(srep.Rewritten) != 0 || !strings.Contains(err.Error(), "--repair-manifest") {
				t.Fatalf("Salvage: %+v, %v", srep, err)
			}
			if got := segmentNames(t, dir); !slices.Equal(got, before) {
				t.Fatalf("Salvage changed the segments: %v, want %v", got, before)
			}
			if _, err := RepairManifest(dir, RepairOptions{}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no archive holds seqs 1..%d", lost)) {
				t.Fatalf("RepairManifest without an archive: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, manifestName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused repair wrote the manifest: %v", err)
			}
			rrep, err := RepairManifest(dir, RepairOptions{Deleted: true})
			if err != nil || rrep.FirstSeq != lost+1 || len(rrep.Removed) != 1 || rrep.Removed[0].Archive != "" || rrep.Removed[0].Last != lost {
				t.Fatalf("RepairManifest --deleted: %+v, %v", rrep, err)
			}
			if v, err := Verify(dir); err != nil || v.Entries != 10-lost || v.First != lost+1 {
				t.Fatalf("Verify after the repair: %+v %v", v, err)
			}
			l, err := Open(Options{Dir: dir, NoSync: true})
			if err != nil {
				t.Fatalf("Open after the repair: %v", err)
			}
			defer l.Close()
			if l.FirstSeq() != lost+1 || l.LastSeq() != 10 || l.Repaired() != nil {
				t.Fatalf("first %d last %d repaired %+v", l.FirstSeq(), l.LastSeq(), l.Repaired())
			}
			for _, err := range l.Events(1) {
				if !errors.Is(err, ErrCompacted) || !strings.Contains(err.Error(), "deleted") {
					t.Fatalf("Events(1): %v", err)
				}
				break
			}
			n := 0
			for ev, err := range l.Events(lost + 1) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if !bytes.Equal(entryBytes(t, ev), entryBytes(t, evs[ev.Seq-1])) {
					t.Fatalf("seq %d changed", ev.Seq)
				}
			}
			if n != int(10-lost) {
				t.Fatalf("%d events", n)
			}
		})
	}
}

// tidwall/wal acts on its truncation markers when it opens a log: for
// <seq>.START it deletes every segment before seq, for <seq>.END every
// segment after it. cmlab never truncates through tidwall, and its own
// scan ignores such names, so a stray marker (another tool, a restored
// backup) must make Open refuse and change nothing, not delete
// acknowledged entries.
func TestAdvOpenRefusesTidwallTruncationMarkers(t *testing.T) {
	for _, suffix := range []string{".START", ".END"} {
		t.Run(suffix[1:], func(t *testing.T) {
			home := t.TempDir()
			buildLog(t, home, 10, 700) // segments 1-3, 4-6, 7-9, 10
			dir := filepath.Join(home, "wal")
			marker := filepath.Join(dir, segmentName(4)+suffix)
			if err := os.WriteFile(marker, orDie(t, os.ReadFile, filepath.Join(dir, segmentName(4))), 0o600); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			// Verify says what Open will do, though every entry is good.
			if _, err := Verify(dir); err == nil || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(marker)+" is a tidwall/wal truncation marker") {
				t.Fatalf("Verify: %v, want an error naming %s", err, filepath.Base(marker))
			}
			l, err := Open(Options{Dir: dir, NoSync: true})
			if err == nil {
				l.Close()
				t.Fatalf("Open accepted a log with %s", filepath.Base(marker))
			}
			if !strings.Contains(err.Error(), filepath.Base(marker)) {
				t.Fatalf("Open: %v, want it to name %s", err, filepath.Base(marker))
			}
			after := snapshot(t, dir)
			if len(after) != len(before) {
				t.Fatalf("the refused Open left %d segments of %d", len(after), len(before))
			}
			for name, b := range before {
				if !bytes.Equal(after[name], b) {
					t.Fatalf("the refused Open changed %s", name)
				}
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("the marker is gone: %v", err)
			}
			// Moved away, the log opens whole.
			if err := os.Rename(marker, filepath.Join(home, filepath.Base(marker))); err != nil {
				t.Fatal(err)
			}
			if rep, err := Verify(dir); err != nil || rep.Entries != 10 {
				t.Fatalf("Verify without the marker: %+v %v", rep, err)
			}
			l, err = Open(Options{Dir: dir, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.FirstSeq() != 1 || l.LastSeq() != 10 {
				t.Fatalf("first %d last %d", l.FirstSeq(), l.LastSeq())
			}
		})
	}
}

func orDie[A, R any](t *testing.T, f func(A) (R, error), a A) R {
	t.Helper()
	r, err := f(a)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Frames whose length prefix changes width (entries of 127/128 and
// 16383/16384 bytes) landing exactly on, one byte short of and one byte
// past the segment size: the writer's mirror of tidwall's cycle rule
// holds after every append, and the directory is fsynced exactly when a
// segment file was created.
func TestAdvFramesAtSegmentBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames []int // frame sizes (length prefix included), appended one by one
		seg    int
	}{
		// entry 127 → frame 128; entry 128 → frame 130.
		{"exact-fit-1-byte-prefix", []int{128, 128, 128, 128}, 256},
		{"exact-fit-2-byte-prefix", []int{130, 130, 130, 130}, 260},
		{"one-short", []int{128, 130, 128, 130, 128}, 259},
		{"one-past", []int{128, 130, 128, 130, 128}, 257},
		// entry 16383 → frame 16385; entry 16384 → frame 16387.
		{"3-byte-prefix", []int{16385, 16387, 16385, 16387}, 16385 + 16387},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			l := openT(t, Options{Dir: dir, SegmentSize: tc.seg, Now: fixedNow})
			cw := &countingWriter{Writer: l.w}
			l.w = cw
			var want []*events.Event
			tail := 0 // bytes in the tail segment, by tidwall's rule
			for i, frame := range tc.frames {
				ev := advRawEvent(t, uint64(i+1), frame)
				if framesLen(t, []*events.Event{ev}) != frame {
					t.Fatalf("test setup: frame %d", frame)
				}
				ev.Seq = 0
				before, dirSyncs := len(orDie(t, listSegments, dir)), cw.dirSyncs
				if _, err := l.Append(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
				want = append(want, ev)
				wantCycle := tail > tc.seg // before the entry
				if wantCycle {
					tail = 0
				}
				tail += frame
				if tail >= tc.seg { // after it
					wantCycle, tail = true, 0
				}
				after := len(orDie(t, listSegments, dir))
				if (after > before) != wantCycle || (cw.dirSyncs > dirSyncs) != wantCycle {
					t.Fatalf("frame %d: segments %d → %d, directory fsyncs %d → %d, want a new segment: %v", i, before, after, dirSyncs, cw.dirSyncs, wantCycle)
				}
				if l.tww.tail != tail {
					t.Fatalf("frame %d: writer counts %d bytes in the tail, tidwall's rule %d", i, l.tww.tail, tail)
				}
				advCheckWriter(t, l)
			}
			advReadAll(t, l, want)
			advCheckSegments(t, dir, tc.seg)
		})
	}
}

// advRawEvent returns a minimal event for seq (short id, msgpack string
// payload) whose frame is exactly frame bytes.
func advRawEvent(t *testing.T, seq uint64, frame int) *events.Event {
	t.Helper()
	build := func(n int) *events.Event {
		var data []byte
		switch {
		case n < 32:
			data = []byte{0xa0 | byte(n)}
		case n < 256:
			data = []byte{0xd9, byte(n)}
		default:
			data = []byte{0xda, byte(n >> 8), byte(n)}
		}
		data = append(data, strings.Repeat("r", n)...)
		return &events.Event{Seq: seq, V: 1, ID: fmt.Sprintf("id-%d", seq), Type: "adv.raw", TS: fixedNow().UnixMilli(), Stream: "s", Data: data}
	}
	for n := 0; n < 1<<16; {
		got := framesLen(t, []*events.Event{build(n)})
		if got == frame {
			return build(n)
		}
		if got > frame {
			break
		}
		n += max(1, (frame-got)/2)
	}
	t.Fatalf("no raw event of a %d-byte frame", frame)
	return nil
}

// One *events.Event passed twice to an Append would be written twice but
// carry only the second sequence: Apply would see seq 2 twice and never
// seq 1, so the live views would differ from a rebuild from the log. It is
// refused as an invalid event, and nothing is written.
func TestAdvAppendRefusesTheSameEventTwice(t *testing.T) {
	var applied []uint64
	l := openT(t, Options{Dir: filepath.Join(t.TempDir(), "wal"), Apply: func(evs []*events.Event) error {
		for _, ev := range evs {
			applied = append(applied, ev.Seq)
		}
		return nil
	}})
	a, b := testEvent(1), testEvent(2)
	many := make([]*events.Event, 40)
	for i := range many {
		many[i] = testEvent(10 + i)
	}
	many[33] = many[7]
	for _, batch := range [][]*events.Event{{a, a}, {a, b, a}, many} {
		if seqs, err := l.Append(context.Background(), batch...); !errors.Is(err, ErrInvalidEvent) || seqs != nil {
			t.Fatalf("Append of %d events holding one twice: %v %v", len(batch), seqs, err)
		}
	}
	if l.LastSeq() != 0 || len(applied) != 0 || l.Err() != nil {
		t.Fatalf("after refused appends: LastSeq %d, applied %v, Err %v", l.LastSeq(), applied, l.Err())
	}
	if seqs, err := l.Append(context.Background(), a, b); err != nil || seqs[0] != 1 || seqs[1] != 2 || a.Seq != 1 || b.Seq != 2 {
		t.Fatalf("Append of two events: %v %v (seqs %d %d)", seqs, err, a.Seq, b.Seq)
	}
	if len(applied) != 2 || applied[0] != 1 || applied[1] != 2 {
		t.Fatalf("applied %v", applied)
	}
}

// A Reader following a log through a write failure, the failed log's
// Close, a reopen that repairs the torn frame the failure left, and more
// appends: everything it yields is what the reopened log holds, in order
// and byte for byte — never the torn frame, never an entry the repair cut.
func TestAdvFollowerAcrossFailureAndRepair(t *testing.T) {
	for _, tc := range []struct {
		name    string
		segSize int
		arm     func(f *Faults)
	}{
		{"short-write-preallocated", 1 << 20, func(f *Faults) { f.ShortWrite(syscall.ENOSPC) }},
		{"short-write-small-segments", 2 << 10, func(f *Faults) { f.ShortWrite(syscall.ENOSPC) }},
		{"fsync-error", 1 << 20, func(f *Faults) { f.FailSync(syscall.EIO) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			faults := &Faults{}
			l, err := Open(Options{Dir: dir, SegmentSize: tc.segSize, Faults: faults, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var mu sync.Mutex
			var followed []*events.Event
			var followErr error
			r := mustReader(t, dir)
			followDone := make(chan struct{})
			go func() {
				defer close(followDone)
				for ev, err := range r.Follow(ctx, 1, time.Millisecond) {
					mu.Lock()
					if err != nil {
						followErr = err
					} else {
						followed = append(followed, ev)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			appendAll := func(l *Log, base, n int) {
				var wg sync.WaitGroup
				for w := 0; w < 8; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < n; i++ {
							if _, err := l.Append(context.Background(), advEvent(base+w*1000+i, 300)); err != nil {
								return // after the fault: every append fails
							}
						}
					}()
				}
				wg.Wait()
			}
			appendAll(l, 0, 30)
			tc.arm(faults)
			appendAll(l, 100000, 30)
			if faults.Fired() != 1 || l.Err() == nil {
				t.Fatalf("fired %d, Err %v", faults.Fired(), l.Err())
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, err := Open(Options{Dir: dir, SegmentSize: tc.segSize, Now: fixedNow})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l2.Close()
			appendAll(l2, 200000, 10)
			last := l2.LastSeq()
			waitFor(t, "the follower to reach the reopened log's end", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return followErr != nil || uint64(len(followed)) >= last
			})
			cancel()
			<-followDone
			if followErr != nil {
				t.Fatalf("follower after %d events: %v", len(followed), followErr)
			}
			if uint64(len(followed)) != last {
				t.Fatalf("follower yielded %d events, the log holds %d", len(followed), last)
			}
			i := 0
			for ev, err := range l2.Events(1) {
				if err != nil {
					t.Fatal(err)
				}
				if f := followed[i]; f.Seq != ev.Seq || !bytes.Equal(entryBytes(t, f), entryBytes(t, ev)) {
					t.Fatalf("followed event %d (seq %d, %s) is not the log's seq %d (%s)", i, f.Seq, f.Type, ev.Seq, ev.Type)
				}
				i++
			}
			if (l2.Repaired() != nil) != (tc.name != "fsync-error") {
				t.Fatalf("repaired %+v", l2.Repaired())
			}
		})
	}
}

// Torn tails cut by successive Opens — right after a recorded repair, and
// after more appends — are each recorded exactly once; quarantine files
// of other segments, of offsets past the entries, and names that only
// look like cuts are never recorded.
func TestAdvEachCutRecordedOnce(t *testing.T) {
	home := t.TempDir()
	dir, qdir := filepath.Join(home, "wal"), filepath.Join(home, "quarantine")
	buildLog(t, home, 4, 1<<20)
	if err := os.MkdirAll(qdir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		segmentName(7) + "-at-0.torn",               // another segment
		segmentName(1) + "-at-99999.torn",           // past the entries
		segmentName(1) + "-at-12.torn.x",            // not a cut's name
		segmentName(1) + "-at-5.salvaged",           // a salvage's, not a cut's
		segmentName(1) + "-at-" + "notanumber.torn", // no offset
	} {
		if err := os.WriteFile(filepath.Join(qdir, name), []byte{1, 2, 3}, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	torn := []byte{0xd0, 0x01, 0xC1, 0x12, 0x34}
	var cuts []string
	for round, appendAfter := range []int{0, 0, 3, 0} {
		if err := appendToTail(dir, torn); err != nil {
			t.Fatal(err)
		}
		l, err := Open(Options{Dir: dir, SegmentSize: 1 << 20, Now: fixedNow, NoSync: true})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if l.Repaired() == nil {
			t.Fatalf("round %d: no repair", round)
		}
		cuts = append(cuts, l.Repaired().Quarantine)
		for i := 0; i < appendAfter; i++ {
			if _, err := l.Append(context.Background(), testEvent(100+i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	l := openT(t, Options{Dir: dir, SegmentSize: 1 << 20, Now: fixedNow, NoSync: true})
	if l.Repaired() != nil {
		t.Fatalf("a clean reopen recorded %+v", l.Repaired())
	}
	var recorded []string
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == events.TypeWalRepaired {
			r, err := events.DecodeAs[*events.WalRepaired](ev)
			if err != nil {
				t.Fatal(err)
			}
			recorded = append(recorded, r.Quarantine)
		}
	}
	if strings.Join(recorded, " ") != strings.Join(cuts, " ") {
		t.Fatalf("recorded %v, want each cut once: %v", recorded, cuts)
	}
}

package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// tailSegment returns the path and bytes of the last segment of dir.
func tailSegment(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	p, b, _ := tailScan(t, dir)
	return p, b
}

// tailScan returns the path, bytes and scan of the last segment of dir.
func tailScan(t *testing.T, dir string) (string, []byte, segmentScan) {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments of %s: %v %v", dir, segs, err)
	}
	last := segs[len(segs)-1]
	p := filepath.Join(dir, last.Name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b, scanSegment(last, b, true, false)
}

// framesLen is the bytes the frames of evs take in a segment.
func framesLen(t *testing.T, evs []*events.Event) int {
	t.Helper()
	n := 0
	for _, ev := range evs {
		b := entryBytes(t, ev)
		n += uvarintLen(uint64(len(b))) + len(b)
	}
	return n
}

// copyLogDir copies the files of a log directory as they are on disk now:
// what a machine that lost power or a SIGKILLed process leaves behind of a
// log whose every write(2) reached the page cache.
func copyLogDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	segs, err := listSegments(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(src, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, s.Name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// crashImage appends n events to a preallocated log under a new root and
// copies its files, as they are on disk while it is open, to
// root/crash/wal: the image a crash leaves.
func crashImage(t *testing.T, n int) (root, crash string, evs []*events.Event) {
	t.Helper()
	root = t.TempDir()
	l := openT(t, Options{Dir: filepath.Join(root, "wal"), SegmentSize: 8 << 20})
	evs = appendN(t, l, n)
	crash = filepath.Join(root, "crash", "wal")
	copyLogDir(t, filepath.Join(root, "wal"), crash)
	return root, crash, evs
}

// checkEvents reads l from the start: want, byte for byte, then a
// wal.repaired event if repaired.
func checkEvents(t *testing.T, l *Log, want []*events.Event, repaired bool) {
	t.Helper()
	i := 0
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		switch {
		case i < len(want) && ev.Seq == want[i].Seq && bytes.Equal(entryBytes(t, ev), entryBytes(t, want[i])):
		case i == len(want) && repaired && ev.Type == events.TypeWalRepaired:
		default:
			t.Fatalf("event %d (seq %d, %s) is not the one appended", i, ev.Seq, ev.Type)
		}
		i++
	}
	if n := len(want) + map[bool]int{true: 1}[repaired]; i != n {
		t.Fatalf("read %d events, want %d", i, n)
	}
}

// A log whose segments can hold 1 MiB keeps zeros ahead of its data; every
// reader sees just the entries, and Close cuts the zeros. (With 1 MiB
// steps, 100 events do not start a background region: the file stays at
// the unit Open zero-filled.)
func TestPreallocatedTailIsNotDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: 8 << 20, Preallocate: 1 << 20})
	evs := appendN(t, l, 100)
	data := framesLen(t, evs)
	_, b := tailSegment(t, dir)
	if len(b) != preallocUnit {
		t.Fatalf("tail segment is %d bytes, want the %d Open preallocates", len(b), preallocUnit)
	}
	if !allZero(b[data:]) {
		t.Fatal("bytes after the entries are not zero")
	}
	rep, err := Verify(dir)
	if err != nil || rep.TornTail != nil || rep.Entries != 100 || rep.Last != 100 {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
	st, err := Stat(dir)
	if err != nil || st.TornTail || st.Events != 100 || st.Segments[0].Preallocated != int64(preallocUnit-data) {
		t.Fatalf("Stat: %+v %v", st, err)
	}
	checkEvents(t, l, evs, false)
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	if last, err := r.LastSeq(); err != nil || last != 100 {
		t.Fatalf("Reader.LastSeq = %d, %v", last, err)
	}
	n := 0
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatalf("Reader.Events: %v", err)
		}
		n++
		if ev.Seq != uint64(n) {
			t.Fatalf("Reader.Events: seq %d at %d", ev.Seq, n)
		}
	}
	if n != 100 {
		t.Fatalf("Reader.Events read %d events", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, b := tailSegment(t, dir); len(b) != data {
		t.Fatalf("after Close the tail segment is %d bytes, want %d (its entries)", len(b), data)
	}
}

// The image a crash leaves (entries, then zeros to a multiple of 1 MiB)
// opens without a repair: the zeros are cut, nothing is quarantined.
func TestPreallocatedTailAfterCrash(t *testing.T) {
	root, crash, evs := crashImage(t, 50)
	l2 := openT(t, Options{Dir: crash, SegmentSize: 8 << 20, Preallocate: -1})
	if l2.Repaired() != nil {
		t.Fatalf("preallocated zeros were repaired as damage: %+v", l2.Repaired())
	}
	if _, err := os.Stat(filepath.Join(root, "crash", "quarantine")); !os.IsNotExist(err) {
		t.Fatalf("quarantine was created: %v", err)
	}
	if _, b := tailSegment(t, crash); len(b) != framesLen(t, evs) {
		t.Fatalf("tail segment is %d bytes after open, want %d", len(b), framesLen(t, evs))
	}
	checkEvents(t, l2, evs, false)
	more, err := l2.Append(context.Background(), testEvent(50))
	if err != nil || more[0] != 51 {
		t.Fatalf("append after reopen: %v %v", more, err)
	}
}

// A torn write inside preallocated space is a torn tail: exactly its bytes
// are quarantined, the zeros after it are not.
func TestTornWriteInsidePreallocatedSpace(t *testing.T) {
	root, crash, evs := crashImage(t, 30)
	p, b := tailSegment(t, crash)
	data := framesLen(t, evs)
	// Half of a frame: its length runs past the bytes written.
	torn := append(binary.AppendUvarint(nil, 180), bytes.Repeat([]byte{0xC1, 0x7f}, 40)...)
	copy(b[data:], torn)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l2 := openT(t, Options{Dir: crash, SegmentSize: 8 << 20, Preallocate: -1})
	rep := l2.Repaired()
	if rep == nil || rep.Offset != int64(data) || rep.Length != int64(len(torn)) || rep.FirstSeq != 31 {
		t.Fatalf("repair: %+v, want offset %d length %d", rep, data, len(torn))
	}
	q, err := os.ReadFile(filepath.Join(root, "crash", "quarantine", rep.Quarantine))
	if err != nil || !bytes.Equal(q, torn) {
		t.Fatalf("quarantined %d bytes (%v), want the %d torn bytes exactly", len(q), err, len(torn))
	}
	if _, after := tailSegment(t, crash); !bytes.Equal(after[:data], b[:data]) {
		t.Fatalf("entries changed by the repair")
	}
	checkEvents(t, l2, evs, true)
}

// Zeros ending at a size that is not a multiple of the unit are a zero
// fill, repaired and recorded as before.
func TestZeroFillAtOddSizeIsStillRepaired(t *testing.T) {
	_, crash, evs := crashImage(t, 20)
	p, b := tailSegment(t, crash)
	b = append(b, make([]byte, 100)...)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	data := framesLen(t, evs)
	l2 := openT(t, Options{Dir: crash, SegmentSize: 8 << 20, Preallocate: -1})
	rep := l2.Repaired()
	if rep == nil || rep.Reason != ReasonZeroFill || rep.Offset != int64(data) || rep.Length != int64(len(b)-data) {
		t.Fatalf("repair: %+v, want a zero fill of %d bytes at %d", rep, len(b)-data, data)
	}
	checkEvents(t, l2, evs, true)
}

// An entry whose last bytes are zeros, followed by preallocated space, is
// kept whole: the zeros are told apart by frames, not by value.
func TestEntryEndingInZerosBeforePreallocatedSpace(t *testing.T) {
	ev := events.MustNew("s", &events.WalRepaired{Segment: "x", Quarantine: "q", Reason: "r"})
	ev.Seq = 1
	entry := entryBytes(t, ev)
	if entry[len(entry)-1] != 0 {
		t.Fatalf("test setup: the entry ends in %#x, want 0", entry[len(entry)-1])
	}
	data := binary.AppendUvarint(nil, uint64(len(entry)))
	data = append(data, entry...)
	frame := len(data)
	data = append(data, make([]byte, preallocUnit-len(data))...)
	sc := scanSegment(segmentFile{Name: segmentName(1), First: 1}, data, true, false)
	if len(sc.Bad) != 0 || sc.Count != 1 || sc.Prealloc != int64(preallocUnit-frame) {
		t.Fatalf("scan: count %d bad %v prealloc %d, want 1 entry and %d preallocated", sc.Count, sc.Bad, sc.Prealloc, preallocUnit-frame)
	}
	// The same bytes in a segment that is not the last are damage.
	sc = scanSegment(segmentFile{Name: segmentName(1), First: 1}, data, false, false)
	if len(sc.Bad) != 1 || sc.Bad[0].Reason != ReasonZeroFill || sc.Bad[0].TornTail {
		t.Fatalf("non-last segment: %+v", sc.Bad)
	}
}

// Many background regions and several segments under concurrent appenders
// and a concurrent reader: no zero ever lands on an entry, no closed
// segment keeps zeros, every event reads back byte for byte.
func TestPreallocationUnderLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: 3 << 20, Preallocate: 1 << 20})
	const workers, per = 16, 600
	pad := strings.Repeat("z", 900)
	got := make([][]*events.Event, workers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readErr := make(chan error, 1)
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// A follower on the live log must never see damage.
		var next uint64 = 1
		for ev, err := range r.Follow(ctx, 1, time.Millisecond) {
			if err != nil {
				readErr <- err
				return
			}
			if ev.Seq != next {
				readErr <- fmt.Errorf("reader: seq %d, want %d", ev.Seq, next)
				return
			}
			next++
		}
		readErr <- nil
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				ev := events.MustNew("s", &events.WalSalvaged{LostSeq: uint64(w*per + i), Segment: "load", Reason: pad})
				if _, err := l.Append(context.Background(), ev); err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], ev)
			}
		}()
	}
	wg.Wait()
	cancel()
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	segs, _ := listSegments(dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	bySeq := map[uint64]*events.Event{}
	for _, evs := range got {
		for _, ev := range evs {
			bySeq[ev.Seq] = ev
		}
	}
	if len(bySeq) != workers*per {
		t.Fatalf("%d distinct sequences acknowledged, want %d", len(bySeq), workers*per)
	}
	n := 0
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(entryBytes(t, ev), entryBytes(t, bySeq[ev.Seq])) {
			t.Fatalf("seq %d differs from what was appended", ev.Seq)
		}
		n++
	}
	if n != workers*per {
		t.Fatalf("read %d events", n)
	}
	rep, err := Verify(dir)
	if err != nil || rep.TornTail != nil || rep.Entries != uint64(workers*per) {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
	for _, s := range segs[:len(segs)-1] {
		b, _ := os.ReadFile(filepath.Join(dir, s.Name))
		if sc := scanSegment(s, b, true, false); sc.Prealloc != 0 {
			t.Fatalf("closed segment %s keeps %d preallocated bytes", s.Name, sc.Prealloc)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir); err != nil || rep.Entries != uint64(workers*per) {
		t.Fatalf("Verify after Close: %+v %v", rep, err)
	}
	_, b := tailSegment(t, dir)
	if len(b)%preallocUnit == 0 && trailingZeros(b) > 0 {
		t.Fatal("Close left preallocated zeros")
	}
}

// A live reader that finds zeros with a good frame after them in
// preallocated space (what a write in progress can look like) pauses
// there; finding the same bytes again on its next read is corruption.
// A one-shot Events looks twice itself, as Verify does.
func TestLiveReaderGapInPreallocatedSpace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	gapImage(t, dir, 3, func(dataEnd int) int { return dataEnd + 300 }) // the gap
	c := &cursor{dir: dir}
	n := 0
	stop, err := c.read(1, math.MaxUint64, true, func(ev *events.Event, err error) bool {
		n++
		if err != nil || ev.Seq != uint64(n) {
			t.Fatalf("event %d: seq %d, %v", n, ev.Seq, err)
		}
		return true
	})
	if stop || err != nil || n != 2 {
		t.Fatalf("first sighting: stop %v, %v after %d events; want a pause after 2", stop, err, n)
	}
	if _, err := c.read(1, math.MaxUint64, true, func(*events.Event, error) bool { n++; return true }); !errors.Is(err, ErrCorrupt) || n != 2 {
		t.Fatalf("second sighting: %v after %d more events, want ErrCorrupt and none", err, n-2)
	}
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got error
	n = 0
	for ev, err := range r.Events(1) {
		if err != nil {
			got = err
			break
		}
		n++
		if ev.Seq != uint64(n) {
			t.Fatalf("seq %d", ev.Seq)
		}
	}
	if n != 2 || !errors.Is(got, ErrCorrupt) {
		t.Fatalf("Events: %d events then %v, want 2 then ErrCorrupt", n, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got = nil
	n = 0
	for _, err := range r.Follow(ctx, 1, time.Millisecond) {
		if err != nil {
			got = err
			break
		}
		n++
	}
	if n != 2 || !errors.Is(got, ErrCorrupt) {
		t.Fatalf("Follow: %d events then %v, want 2 then ErrCorrupt", n, got)
	}
	// Verify reads the same bytes twice and reports the gap.
	if rep, err := Verify(dir); !errors.Is(err, ErrCorrupt) || len(rep.Bad) != 1 || rep.Bad[0].Seq != 3 || rep.Bad[0].Length != 300 {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
}

// Salvage of a crash image whose last segment is preallocated and damaged
// in the middle: the lost entry is replaced, the zeros are dropped, and
// the log opens.
func TestSalvagePreallocatedTail(t *testing.T) {
	root, crash, evs := crashImage(t, 40)
	p, b := tailSegment(t, crash)
	// Flip a byte inside the 10th entry.
	off := framesLen(t, evs[:9]) + 30
	b[off] ^= 0x40
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: crash}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	rep, err := Salvage(crash, filepath.Join(root, "crash", "quarantine"))
	if err != nil || len(rep.Lost) != 1 || rep.Lost[0].Seq != 10 {
		t.Fatalf("Salvage: %+v %v", rep, err)
	}
	l2 := openT(t, Options{Dir: crash, SegmentSize: 8 << 20})
	if l2.Repaired() != nil {
		t.Fatalf("repair after salvage: %+v", l2.Repaired())
	}
	n := 0
	for ev, err := range l2.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if ev.Seq == 10 {
			if ev.Type != events.TypeWalSalvaged {
				t.Fatalf("seq 10 is %s, want the salvage placeholder", ev.Type)
			}
		} else if !bytes.Equal(entryBytes(t, ev), entryBytes(t, evs[ev.Seq-1])) {
			t.Fatalf("seq %d changed", ev.Seq)
		}
	}
	if n != 40 {
		t.Fatalf("%d events after salvage", n)
	}
}

func mustReader(t *testing.T, dir string) *Reader {
	t.Helper()
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gapImage writes a last segment of 1 MiB: seqs 1..n-1, zeros up to the
// offset gapEnd returns for where they end, a good frame of seq n there,
// zeros after. It returns where the zeros start and where frame n ends.
func gapImage(t *testing.T, dir string, n uint64, gapEnd func(dataEnd int) int) (dataEnd, lastEnd int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var data []byte
	for seq := uint64(1); seq <= n; seq++ {
		ev := testEvent(int(seq))
		ev.Seq = seq
		ev.TS = fixedNow().UnixMilli()
		e := entryBytes(t, ev)
		if seq == n {
			dataEnd = len(data)
			data = append(data, make([]byte, gapEnd(dataEnd)-len(data))...)
		}
		data = binary.AppendUvarint(data, uint64(len(e)))
		data = append(data, e...)
	}
	lastEnd = len(data)
	data = append(data, make([]byte, preallocUnit-len(data))...)
	if err := os.WriteFile(filepath.Join(dir, segmentName(1)), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dataEnd, lastEnd
}

// unflushedImage is gapImage with seqs 1..3, then zeros up to the fixed
// offset gapEnd, then seq 4.
func unflushedImage(t *testing.T, dir string, gapEnd int) (dataEnd, frame4End int) {
	t.Helper()
	return gapImage(t, dir, 4, func(int) int { return gapEnd })
}

// After a power cut, preallocated space can hold zeros up to a sector
// boundary and then a later page that did reach the disk: nothing from
// the zeros on was acknowledged, so it is a torn tail, cut whole and
// quarantined; live readers stop there without an error.
func TestUnflushedPagesAreATornTail(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "wal")
	dataEnd, frame4End := unflushedImage(t, dir, 4096)
	// A following reader's cursor reads the same bytes three times.
	c := &cursor{dir: dir}
	n := 0
	for i := 0; i < 3; i++ {
		stop, err := c.read(1, math.MaxUint64, true, func(ev *events.Event, err error) bool {
			if n++; ev.Seq != uint64(n) {
				t.Fatalf("seq %d", ev.Seq)
			}
			return true
		})
		if err != nil || stop {
			t.Fatalf("read %d: stop %v err %v", i, stop, err)
		}
	}
	if n != 3 {
		t.Fatalf("read %d events, want 3", n)
	}
	if last, err := mustReader(t, dir).LastSeq(); err != nil || last != 3 {
		t.Fatalf("Reader.LastSeq %d %v", last, err)
	}
	if rep, err := Verify(dir); err != nil || rep.TornTail == nil || rep.TornTail.Reason != ReasonZeroGap || rep.Last != 3 {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
	l := openT(t, Options{Dir: dir, SegmentSize: 8 << 20, Preallocate: -1})
	rep := l.Repaired()
	if rep == nil || rep.Reason != ReasonZeroGap || rep.Offset != int64(dataEnd) || rep.Length != int64(frame4End-dataEnd) || rep.FirstSeq != 4 {
		t.Fatalf("repair %+v, want a zero gap at %d of %d bytes", rep, dataEnd, frame4End-dataEnd)
	}
	b, err := os.ReadFile(filepath.Join(root, "quarantine", rep.Quarantine))
	if err != nil || len(b) != frame4End-dataEnd || !allZero(b[:4096-dataEnd]) || allZero(b[4096-dataEnd:]) {
		t.Fatalf("quarantine: %d bytes, %v", len(b), err)
	}
	if l.LastSeq() != 4 { // 1..3 and the repair
		t.Fatalf("LastSeq %d", l.LastSeq())
	}
}

// The same shape with the zeros ending off a sector boundary is not what
// unwritten pages leave: damage, refused.
func TestZeroGapOffSectorIsDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	unflushedImage(t, dir, 4096+100)
	if _, err := Open(Options{Dir: dir, SegmentSize: 8 << 20}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}

// A single byte that zeroes a frame's length prefix just before a sector
// boundary looks like the start of a zero gap, but a one-byte run is
// damage, not unwritten pages: Open refuses.
func TestZeroedLengthByteIsNotAGap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var data []byte
	flipped := uint64(0)
	for seq := uint64(1); seq < 5000 && (flipped == 0 || seq < flipped+5); seq++ {
		ev := events.MustNew("s", &events.WalSalvaged{LostSeq: seq, Segment: "z", Reason: strings.Repeat("r", int(seq%61))})
		ev.Seq, ev.TS = seq, fixedNow().UnixMilli()
		e := entryBytes(t, ev)
		if flipped == 0 && (len(data)+1)%sectorSize == 0 {
			flipped = seq
		}
		data = binary.AppendUvarint(data, uint64(len(e)))
		data = append(data, e...)
	}
	if flipped == 0 {
		t.Fatal("test setup: no frame starts one byte before a sector boundary")
	}
	// Find that frame again and zero its first byte.
	off := 0
	for seq := uint64(1); seq < flipped; seq++ {
		_, n, _ := frameAt(data, off)
		off += n
	}
	data[off] = 0
	data = append(data, make([]byte, alignUp(int64(len(data)), preallocUnit)-int64(len(data)))...)
	sc := scanSegment(segmentFile{Name: segmentName(1), First: 1}, data, true, false)
	if len(sc.Bad) == 0 || sc.Bad[0].TornTail || sc.Bad[0].Seq != flipped || sc.Bad[0].Offset != int64(off) {
		t.Fatalf("scan: %+v, want damage at seq %d offset %d", sc.Bad, flipped, off)
	}
}

func TestZeroScans(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 4096, 4097, 65535, 65536, 65537, 200000} {
		b := make([]byte, n)
		if !allZero(b) || trailingZeros(b) != n {
			t.Fatalf("%d zeros: allZero %v trailingZeros %d", n, allZero(b), trailingZeros(b))
		}
		for _, at := range []int{0, n / 3, n - 1} {
			if n == 0 {
				continue
			}
			b[at] = 7
			if allZero(b) || trailingZeros(b) != n-1-at {
				t.Fatalf("%d bytes, non-zero at %d: allZero %v trailingZeros %d", n, at, allZero(b), trailingZeros(b))
			}
			b[at] = 0
		}
	}
}

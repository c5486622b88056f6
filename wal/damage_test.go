package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// buildLog writes n test events to a new log in home/wal and closes it.
func buildLog(t *testing.T, home string, n, segSize int) []*events.Event {
	t.Helper()
	l, err := Open(Options{Dir: filepath.Join(home, "wal"), SegmentSize: segSize, Now: fixedNow, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	evs := appendN(t, l, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return evs
}

type frameLoc struct {
	seg      string
	off, len int
	seq      uint64
}

// frames lists every frame of the (undamaged) log in dir.
func frames(t *testing.T, dir string) []frameLoc {
	t.Helper()
	var out []frameLoc
	_, err := scanDir(dir, true, func(sc *segmentScan, _ []byte) error {
		if len(sc.Bad) > 0 {
			t.Fatalf("log not clean: %v", sc.Bad)
		}
		for _, g := range sc.Good {
			out = append(out, frameLoc{sc.Segment.Name, int(g.Off), int(g.Len), g.Seq})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// snapshot returns the segment files of dir by name.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(dir, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		m[s.Name] = b
	}
	return m
}

// restore writes files into a fresh home's wal directory.
func restore(t *testing.T, files map[string][]byte) string {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "wal")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func quarantined(t *testing.T, home string) map[string][]byte {
	t.Helper()
	des, _ := os.ReadDir(filepath.Join(home, "quarantine"))
	m := map[string][]byte{}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(home, "quarantine", de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[de.Name()] = b
	}
	return m
}

// checkRepaired opens home's log and checks that exactly cut (the bytes
// at seg:off) was cut and quarantined, the first keep events are intact,
// and a wal.repaired event follows them.
func checkRepaired(t *testing.T, home, seg string, off int, cut []byte, reason string, want []*events.Event) {
	t.Helper()
	l, err := Open(Options{Dir: filepath.Join(home, "wal"), Now: fixedNow, NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	rep := l.Repaired()
	if rep == nil {
		t.Fatalf("no repair")
	}
	qname := fmt.Sprintf("%s-at-%d.torn", seg, off)
	if rep.Segment != seg || rep.Offset != int64(off) || rep.Length != int64(len(cut)) || rep.Quarantine != qname || rep.FirstSeq != uint64(len(want)+1) {
		t.Fatalf("repair %+v, want segment %s offset %d length %d quarantine %s", rep, seg, off, len(cut), qname)
	}
	if reason != "" && rep.Reason != reason {
		t.Fatalf("reason %q, want %q", rep.Reason, reason)
	}
	q := quarantined(t, home)
	if len(q) != 1 || !bytes.Equal(q[qname], cut) {
		t.Fatalf("quarantine holds %d files; %s = %x, want %x", len(q), qname, q[qname], cut)
	}
	if l.LastSeq() != uint64(len(want)+1) {
		t.Fatalf("last %d, want %d", l.LastSeq(), len(want)+1)
	}
	i := 0
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if i < len(want) {
			if !bytes.Equal(entryBytes(t, ev), entryBytes(t, want[i])) {
				t.Fatalf("seq %d changed by repair", ev.Seq)
			}
		} else {
			r, err := events.DecodeAs[*events.WalRepaired](ev)
			if err != nil || *r != *rep || ev.Stream != "wal" {
				t.Fatalf("repair event %+v %v, want %+v", r, err, rep)
			}
		}
		i++
	}
	if i != len(want)+1 {
		t.Fatalf("%d events, want %d", i, len(want)+1)
	}
}

func TestTornTailEveryLength(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	evs := buildLog(t, src, 6, 900) // two segments, the last holding several entries
	dir := filepath.Join(src, "wal")
	fr := frames(t, dir)
	last := fr[len(fr)-1]
	if last.seg == fr[0].seg {
		t.Fatal("want a multi-segment log")
	}
	files := snapshot(t, dir)
	whole := files[last.seg]
	if last.off+last.len != len(whole) {
		t.Fatal("last frame does not end the file")
	}
	for k := 0; k < last.len; k++ {
		t.Run(fmt.Sprintf("keep%d", k), func(t *testing.T) {
			f := map[string][]byte{}
			for n, b := range files {
				f[n] = b
			}
			f[last.seg] = whole[:last.off+k]
			home := restore(t, f)
			if k == 0 {
				// Nothing torn: the file ends on a frame boundary.
				l, err := Open(Options{Dir: filepath.Join(home, "wal"), NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				if l.Repaired() != nil || l.LastSeq() != uint64(len(evs)-1) {
					t.Fatalf("repaired %+v last %d", l.Repaired(), l.LastSeq())
				}
				return
			}
			checkRepaired(t, home, last.seg, last.off, whole[last.off:last.off+k], "", evs[:len(evs)-1])
		})
	}
	for _, tc := range []struct {
		name string
		keep int // bytes of the last frame kept before the zeros
	}{{"after-last-entry", -1}, {"inside-last-entry", 7}} {
		t.Run("zero-fill-"+tc.name, func(t *testing.T) {
			f := map[string][]byte{}
			for n, b := range files {
				f[n] = b
			}
			zeros := make([]byte, 4096)
			want := evs
			cutAt := len(whole)
			if tc.keep >= 0 {
				want, cutAt = evs[:len(evs)-1], last.off
			}
			body := append([]byte(nil), whole[:cutAt]...)
			if tc.keep >= 0 {
				body = append(body, whole[last.off:last.off+tc.keep]...)
			}
			f[last.seg] = append(body, zeros...)
			reason := ReasonZeroFill
			if tc.keep >= 0 {
				reason = ""
			}
			home := restore(t, f)
			checkRepaired(t, home, last.seg, cutAt, f[last.seg][cutAt:], reason, want)
		})
	}
}

func TestByteFlipEveryByte(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	buildLog(t, src, 10, 700) // segments of three entries, the last of one
	dir := filepath.Join(src, "wal")
	fr := frames(t, dir)
	files := snapshot(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d segments", len(files))
	}
	last := fr[len(fr)-1]
	if segs, _ := listSegments(dir); segs[len(segs)-1].Name != last.seg {
		t.Fatal("last segment empty")
	}
	flips := 0
	home := restore(t, files)
	wdir := filepath.Join(home, "wal")
	for _, f := range fr {
		for i := 0; i < f.len; i++ {
			b := bytes.Clone(files[f.seg])
			b[f.off+i] ^= flipMask(f.off + i)
			// One byte written in place: rewriting whole files would make
			// ext4 flush them on every round (auto_da_alloc).
			writeAt(t, filepath.Join(wdir, f.seg), int64(f.off+i), b[f.off+i:f.off+i+1])
			isTail := f == last
			rep, verr := Verify(wdir)
			var got BadEntry
			if isTail {
				if verr != nil || rep.TornTail == nil {
					t.Fatalf("%s+%d: tail flip: Verify %v torn %v", f.seg, f.off+i, verr, rep.TornTail)
				}
				got = *rep.TornTail
			} else {
				var ce *CorruptError
				if !errors.As(verr, &ce) || !errors.Is(verr, ErrCorrupt) || len(rep.Bad) != 1 {
					t.Fatalf("%s+%d: Verify %v, bad %v", f.seg, f.off+i, verr, rep.Bad)
				}
				got = rep.Bad[0]
				if got.Lost != 1 {
					t.Fatalf("%s+%d: lost %d, want 1 (%v)", f.seg, f.off+i, got.Lost, got)
				}
			}
			if got.Segment != f.seg || got.Seq != f.seq || got.Offset != int64(f.off) {
				t.Fatalf("flip at %s+%d: Verify says %v, want segment %s offset %d seq %d", f.seg, f.off+i, got, f.seg, f.off, f.seq)
			}
			l, err := Open(Options{Dir: wdir, NoSync: true})
			if isTail {
				if err != nil || l.Repaired() == nil || l.Repaired().Offset != int64(f.off) {
					t.Fatalf("tail flip at %d: open %v", f.off+i, err)
				}
				l.Close()
				// Undo the repair for the next flip.
				if err := os.RemoveAll(filepath.Join(home, "quarantine")); err != nil {
					t.Fatal(err)
				}
			} else {
				want := fmt.Sprintf("segment %s offset %d seq %d", f.seg, f.off, f.seq)
				if err == nil {
					l.Close()
					t.Fatalf("flip at %s+%d: Open accepted a damaged log", f.seg, f.off+i)
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
					t.Fatalf("flip at %s+%d: Open error %q, want it to name %q", f.seg, f.off+i, err, want)
				}
				// Refusal changes nothing.
				after := snapshot(t, wdir)
				if len(after) != len(files) || !bytes.Equal(after[f.seg], b) {
					t.Fatalf("refused open changed the segments")
				}
				if len(quarantined(t, home)) != 0 {
					t.Fatal("refused open quarantined bytes")
				}
			}
			if isTail {
				for n, orig := range files {
					if err := os.WriteFile(filepath.Join(wdir, n), orig, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				writeAt(t, filepath.Join(wdir, f.seg), int64(f.off+i), files[f.seg][f.off+i:f.off+i+1])
			}
			flips++
		}
	}
	t.Logf("%d single-byte flips checked", flips)
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// flipMask varies the flip between bytes: all bits, the lowest bit, the
// highest bit (which turns length bytes into continuation bytes).
func flipMask(i int) byte { return [...]byte{0xFF, 0x01, 0x80}[i%3] }

// TestRepairRecordedAfterCrashBeforeTheEvent: Open cut a torn tail and
// died before appending wal.repaired; the next Open records it, once.
func TestRepairRecordedAfterCrashBeforeTheEvent(t *testing.T) {
	home := t.TempDir()
	buildLog(t, home, 4, 1<<20)
	dir, qdir := filepath.Join(home, "wal"), filepath.Join(home, "quarantine")
	torn := []byte{0xd0, 0x01, 0xC1, 0x12, 0x34}
	if err := appendToTail(dir, torn); err != nil {
		t.Fatal(err)
	}
	// The cut without the event, as a crash between the two would leave it.
	reps, _, err := repairTailRecords(dir, qdir, true)
	if err != nil || len(reps) != 1 {
		t.Fatalf("repairTailRecords: %+v %v", reps, err)
	}
	rep := reps[0]
	l, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	got := l.Repaired()
	if got == nil || got.Quarantine != rep.Quarantine || got.Offset != rep.Offset || got.Length != int64(len(torn)) || got.FirstSeq != 5 || l.LastSeq() != 5 {
		t.Fatalf("late record %+v (cut %+v), last %d", got, rep, l.LastSeq())
	}
	if q := quarantined(t, home); len(q) != 1 || !bytes.Equal(q[rep.Quarantine], torn) {
		t.Fatalf("quarantine %v", q)
	}
	l.Close()
	l2, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.Repaired() != nil || l2.LastSeq() != 5 {
		t.Fatalf("recorded twice: %+v last %d", l2.Repaired(), l2.LastSeq())
	}
}

// appendToTail appends b to the last segment of dir, as a torn write or a
// crash's zero fill would leave it.
func appendToTail(dir string, b []byte) error {
	segs, err := listSegments(dir)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		return errors.New("no segment")
	}
	f, err := os.OpenFile(filepath.Join(dir, segs[len(segs)-1].Name), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

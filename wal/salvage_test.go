package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
)

func TestSalvageReplacesLostEntriesAtTheirSeqs(t *testing.T) {
	home := t.TempDir()
	evs := buildLog(t, home, 13, 700) // segments 1-3, 4-6, 7-9, 10-12, 13
	dir := filepath.Join(home, "wal")
	qdir := filepath.Join(home, "quarantine")
	fr := frames(t, dir)
	bySeq := map[uint64]frameLoc{}
	for _, f := range fr {
		bySeq[f.seq] = f
	}
	files := snapshot(t, dir)
	// Damage: a flipped byte inside seq 2; seqs 5 and 6 (the end of their
	// segment) overwritten by one stretch of garbage; the length prefix of
	// seq 11.
	damage := map[uint64][]byte{}
	mod := func(seq uint64, at int, b byte) {
		f := bySeq[seq]
		files[f.seg][f.off+at] = b
	}
	mod(2, 40, files[bySeq[2].seg][bySeq[2].off+40]^0x10)
	damage[2] = bytes.Clone(files[bySeq[2].seg][bySeq[2].off : bySeq[2].off+bySeq[2].len])
	f5, f6 := bySeq[5], bySeq[6]
	for i := f5.off + 3; i < f6.off+f6.len; i++ {
		files[f5.seg][i] = 0xEE
	}
	damage[5] = bytes.Clone(files[f5.seg][f5.off : f6.off+f6.len])
	mod(11, 0, 0x7f)
	damage[11] = bytes.Clone(files[bySeq[11].seg][bySeq[11].off : bySeq[11].off+bySeq[11].len])
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a damaged log: %v", err)
	}
	rep, err := Salvage(dir, qdir)
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	var lost []uint64
	for _, le := range rep.Lost {
		lost = append(lost, le.Seq)
	}
	if want := []uint64{2, 5, 6, 11}; !equalSeqs(lost, want) {
		t.Fatalf("lost %v, want %v (%+v)", lost, want, rep)
	}
	if len(rep.Rewritten) != 3 || len(rep.Quarantined) != 3 {
		t.Fatalf("rewritten %v quarantined %v", rep.Rewritten, rep.Quarantined)
	}
	q := quarantined(t, home)
	for _, le := range rep.Lost {
		if le.Seq == 6 {
			continue // shares the stretch of seq 5
		}
		if !bytes.Equal(q[le.Quarantine], damage[le.Seq]) {
			t.Fatalf("quarantine %s for seq %d holds %d bytes, want the %d damaged bytes", le.Quarantine, le.Seq, len(q[le.Quarantine]), len(damage[le.Seq]))
		}
		if le.Prev == nil || le.Prev.Seq != le.Seq-1 || le.Prev.Type != events.TypeWalSalvaged || le.Next == nil || le.Guess == "" {
			t.Fatalf("neighbours of seq %d: %+v %+v", le.Seq, le.Prev, le.Next)
		}
	}
	if v, err := Verify(dir); err != nil || v.Entries != 13 {
		t.Fatalf("Verify after salvage: %+v %v", v, err)
	}
	l, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatalf("Open after salvage: %v", err)
	}
	defer l.Close()
	if l.LastSeq() != 13 || l.Repaired() != nil {
		t.Fatalf("last %d repaired %+v", l.LastSeq(), l.Repaired())
	}
	isLost := map[uint64]bool{2: true, 5: true, 6: true, 11: true}
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if isLost[ev.Seq] {
			p, err := events.DecodeAs[*events.WalSalvaged](ev)
			if err != nil || p.LostSeq != ev.Seq || p.Quarantine == "" {
				t.Fatalf("placeholder at %d: %+v %v", ev.Seq, p, err)
			}
			continue
		}
		if !bytes.Equal(entryBytes(t, ev), entryBytes(t, evs[ev.Seq-1])) {
			t.Fatalf("intact seq %d changed", ev.Seq)
		}
	}
	// A second salvage finds nothing to do.
	l.Close()
	rep2, err := Salvage(dir, qdir)
	if err != nil || len(rep2.Lost) != 0 || len(rep2.Rewritten) != 0 {
		t.Fatalf("second salvage: %+v %v", rep2, err)
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSalvageFirstEntryAndLastSegmentWithTornTail(t *testing.T) {
	home := t.TempDir()
	evs := buildLog(t, home, 8, 700) // segments 1-3, 4-6, 7-8
	dir := filepath.Join(home, "wal")
	fr := frames(t, dir)
	// Damage seq 1 (no previous neighbour) and seq 7 (last segment, with
	// seq 8 good after it), then add a torn tail.
	for _, seq := range []uint64{1, 7} {
		f := fr[seq-1]
		writeAt(t, filepath.Join(dir, f.seg), int64(f.off+f.len/2), []byte{0xAA, 0xBB, 0xCC})
	}
	torn := []byte{0xd0, 0x01, 0xC1, 0x12}
	if err := appendToTail(dir, torn); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(dir, filepath.Join(home, "quarantine"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 2 || rep.Lost[0].Seq != 1 || rep.Lost[0].Prev != nil || rep.Lost[0].Next == nil || rep.Lost[0].Next.Seq != 2 ||
		rep.Lost[1].Seq != 7 || rep.Lost[1].Next == nil || rep.Lost[1].Next.Seq != 8 {
		t.Fatalf("report %+v", rep)
	}
	// The torn tail is left for Open, which repairs and records it.
	l, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r := l.Repaired(); r == nil || r.Length != int64(len(torn)) || r.FirstSeq != 9 {
		t.Fatalf("repair %+v", r)
	}
	n := 0
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Seq {
		case 1, 7:
			if ev.Type != events.TypeWalSalvaged || ev.Stream != "wal" {
				t.Fatalf("seq %d is %s", ev.Seq, ev.Type)
			}
		case 9:
			if ev.Type != events.TypeWalRepaired {
				t.Fatalf("seq 9 is %s", ev.Type)
			}
		default:
			if !bytes.Equal(entryBytes(t, ev), entryBytes(t, evs[ev.Seq-1])) {
				t.Fatalf("seq %d changed", ev.Seq)
			}
		}
		n++
	}
	if n != 9 {
		t.Fatalf("%d events", n)
	}
}

func TestSalvageRefusesWhileLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	openT(t, Options{Dir: dir})
	if _, err := Salvage(dir, t.TempDir()); !errors.Is(err, ErrLocked) {
		t.Fatalf("Salvage of a held log: %v", err)
	}
}

func TestMissingSegmentIsRefusedAndSalvaged(t *testing.T) {
	home := t.TempDir()
	buildLog(t, home, 10, 700) // segments 1-3, 4-6, 7-9, 10
	dir := filepath.Join(home, "wal")
	if err := os.Remove(filepath.Join(dir, segmentName(4))); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if !errors.Is(err, ErrCorrupt) || len(rep.Bad) != 1 {
		t.Fatalf("Verify: %v %+v", err, rep.Bad)
	}
	if b := rep.Bad[0]; b.Segment != segmentName(1) || b.Seq != 4 || b.Lost != 3 || b.Reason != ReasonMissing {
		t.Fatalf("bad %+v", b)
	}
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "seq 4") {
		t.Fatalf("Open: %v", err)
	}
	srep, err := Salvage(dir, filepath.Join(home, "quarantine"))
	if err != nil || len(srep.Lost) != 3 || srep.Lost[0].Seq != 4 || srep.Lost[2].Seq != 6 {
		t.Fatalf("Salvage: %+v %v", srep, err)
	}
	l, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var seqs []uint64
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ev.Seq)
		if ev.Seq >= 4 && ev.Seq <= 6 && ev.Type != events.TypeWalSalvaged {
			t.Fatalf("seq %d is %s", ev.Seq, ev.Type)
		}
	}
	if len(seqs) != 10 || l.LastSeq() != 10 {
		t.Fatalf("seqs %v", seqs)
	}
}

package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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

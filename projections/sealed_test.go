package projections

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// sealedHome projects evs into a new home with SealAfter sealAfter,
// checkpointing every 50 events through cut, then applies the rest and
// stops without a checkpoint (a crash): the views run past it.
func sealedHome(t *testing.T, evs []*events.Event, cut int, sealAfter uint64) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	p, err := Open(Options{Home: h, NoSync: true, SealAfter: sealAfter})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cut; i += 50 {
		applyBatches(t, p, evs[i:min(i+50, cut)], 50)
		if err := p.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	applyBatches(t, p, evs[cut:], 50)
	if err := p.CloseNoCheckpoint(); err != nil {
		t.Fatal(err)
	}
	return h
}

// The workload of the sealed-view tests: every event type (blocks begun,
// written, ended, and written again after their end), the crash point,
// and a rebuild of all of it to compare views with.
const sealedTotal, sealedCut = 3000, 2500

func sealedWorkload(t *testing.T) ([]*events.Event, home.Home) {
	t.Helper()
	evs := workloadEvents(WorkloadEveryType, 7, sealedTotal)
	return evs, rebuildInto(t, workloadSrc(WorkloadEveryType, 7, sealedTotal), RebuildOptions{NoSync: true})
}

// sealedViewsOf lists the records of h's state/sealed-views.jsonl.
func sealedViewsOf(t *testing.T, h home.Home, sv *SealedViews) []sealedRecord {
	t.Helper()
	var recs []sealedRecord
	if _, err := eachSealed(context.Background(), h, sv.Size, false, func(r sealedRecord) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestSealedViews: a block's output view that ended, or that was not
// written for SealAfter events, leaves the checkpoint for
// state/sealed-views.jsonl; Open trusts it without opening it; a view
// written again after it was sealed (the every-type workload writes to
// ended blocks) is listed again; and the views stay byte-identical to a
// rebuild, with the whole check at open and deferred, after a crash past
// the checkpoint.
func TestSealedViews(t *testing.T) {
	evs, want := sealedWorkload(t)
	crashed := sealedHome(t, evs, sealedCut, 100)
	cp, err := ReadCheckpoint(crashed)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if cp.Version != checkpointVersion || cp.Sealed == nil || cp.Sealed.Count == 0 {
		t.Fatalf("checkpoint version %d sealed %+v: want version 3 with sealed views", cp.Version, cp.Sealed)
	}
	recs := sealedViewsOf(t, crashed, cp.Sealed)
	if int64(len(recs)) != cp.Sealed.Count {
		t.Fatalf("%d records, the checkpoint counts %d", len(recs), cp.Sealed.Count)
	}
	blockViews := 0
	for v := range cp.Views {
		if sealable(v) {
			blockViews++
		}
	}
	if blockViews >= len(recs) {
		t.Fatalf("the checkpoint still lists %d block views, %d sealed", blockViews, len(recs))
	}
	for _, deferred := range []bool{false, true} {
		h := copyHome(t, crashed)
		p, err := Open(Options{Home: h, NoSync: true, SealAfter: 100, DeferWholeCheck: deferred})
		if err != nil {
			t.Fatal(err)
		}
		if from := p.ReplayFrom(); from != sealedCut+1 {
			t.Fatalf("deferred %v: ReplayFrom %d, want %d", deferred, from, sealedCut+1)
		}
		if c, ok := p.UnverifiedSealed(); ok != deferred || (ok && c.Size != cp.Sealed.Size) {
			t.Fatalf("deferred %v: UnverifiedSealed %+v %v", deferred, c, ok)
		}
		applyBatches(t, p, evs[sealedCut:], 50)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if d, err := Compare(h, want); err != nil || d != nil {
			t.Fatalf("deferred %v: views differ from a rebuild: %v %v", deferred, d, err)
		}
		after, _ := ReadCheckpoint(h)
		damaged, views, _, err := VerifySealed(context.Background(), h, SealedCheck{Size: after.Sealed.Size, CRC: after.Sealed.CRC}, nil)
		if err != nil || len(damaged) > 0 || int64(views) != after.Sealed.Count {
			t.Fatalf("deferred %v: VerifySealed of an intact home: %v, %d views of %d: %v", deferred, damaged, views, after.Sealed.Count, err)
		}
	}
}

// TestSealedViewDamage: a damaged sealed view or sealed-views file is
// found and the views end byte-identical to a rebuild: when Open reads
// everything, by Open itself (the view rebuilt from the log, or, when the
// file does not hold what the checkpoint vouches for, every view); when
// the whole check is deferred, by VerifySealed after open (the engine then
// regenerates), or by Open's tail check of the file.
func TestSealedViewDamage(t *testing.T) {
	evs, want := sealedWorkload(t)
	crashed := sealedHome(t, evs, sealedCut, 100)
	cp, _ := ReadCheckpoint(crashed)
	recs := sealedViewsOf(t, crashed, cp.Sealed)
	// The sealed view with the most bytes, not listed in the checkpoint.
	var victim sealedRecord
	for _, r := range recs {
		if _, listed := cp.Views[r.View]; !listed && r.Size > victim.Size {
			victim = r
		}
	}
	if victim.Size < 4 {
		t.Fatalf("no sealed view to damage: %+v", victim)
	}
	// A block view the checkpoint lists (not sealed): rebuilt when
	// damaged, never taken for a sealed one.
	var hot string
	for v, n := range cp.Views {
		if sealable(v) && n > cp.Views[hot] {
			hot = v
		}
	}
	if hot == "" {
		t.Fatal("no listed block view to damage")
	}
	vpath := func(h home.Home) string { return filepath.Join(h.Dir, filepath.FromSlash(victim.View)) }
	mpath := func(h home.Home) string { return filepath.Join(h.Dir, filepath.FromSlash(SealedViewsFile)) }
	flip := func(path string, at int64) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[at] ^= 0x01
		os.WriteFile(path, b, 0o600)
	}
	for _, tc := range []struct {
		name   string
		tamper func(h home.Home)
		// from: Open's ReplayFrom with the whole check (1: views rebuilt
		// or the checkpoint distrusted); deferredFrom with it deferred.
		from, deferredFrom uint64
		// found: VerifySealed names this (the view, or the file itself).
		found string
	}{
		{"flipped byte in a sealed view", func(h home.Home) { flip(vpath(h), victim.Size/2) }, 1, sealedCut + 1, victim.View},
		{"flipped last byte of a sealed view", func(h home.Home) { flip(vpath(h), victim.Size-1) }, 1, sealedCut + 1, victim.View},
		{"truncated sealed view", func(h home.Home) { os.Truncate(vpath(h), victim.Size/2) }, 1, sealedCut + 1, victim.View},
		{"deleted sealed view", func(h home.Home) { os.Remove(vpath(h)) }, 1, sealedCut + 1, victim.View},
		{"sealed view a symlink to a copy", func(h home.Home) {
			b, _ := os.ReadFile(vpath(h))
			elsewhere := filepath.Join(t.TempDir(), "copy.out")
			os.WriteFile(elsewhere, b, 0o600)
			os.Remove(vpath(h))
			os.Symlink(elsewhere, vpath(h))
		}, 1, sealedCut + 1, victim.View},
		{"bytes appended to a sealed view", func(h home.Home) {
			f, _ := os.OpenFile(vpath(h), os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString("garbage")
			f.Close()
		}, sealedCut + 1, sealedCut + 1, victim.View},
		{"truncated listed block view", func(h home.Home) {
			os.Truncate(filepath.Join(h.Dir, filepath.FromSlash(hot)), cp.Views[hot]/2)
		}, 1, 1, ""},
		{"records past the counted size (a crash before the checkpoint)", func(h home.Home) {
			f, _ := os.OpenFile(mpath(h), os.O_WRONLY|os.O_APPEND, 0)
			fmt.Fprintf(f, `{"view":%q,"size":1,"tail":1,"crc":1}`+"\n", victim.View)
			f.Close()
		}, sealedCut + 1, sealedCut + 1, ""},
		{"flipped byte inside the sealed-views file", func(h home.Home) { flip(mpath(h), 5) }, 1, sealedCut + 1, SealedViewsFile},
		{"flipped byte in the sealed-views file's tail", func(h home.Home) { flip(mpath(h), cp.Sealed.Size-2) }, 1, 1, ""},
		{"truncated sealed-views file", func(h home.Home) { os.Truncate(mpath(h), cp.Sealed.Size/2) }, 1, 1, ""},
		{"deleted sealed-views file", func(h home.Home) { os.Remove(mpath(h)) }, 1, 1, ""},
		{"lying record: a re-sealed checkpoint counts fewer bytes", func(h home.Home) {
			c := *cp
			sv := *cp.Sealed
			sv.Size /= 2
			c.Sealed = &sv
			seal(t, h, c)
		}, 1, 1, ""},
		{"lying record: a re-sealed checkpoint with another CRC", func(h home.Home) {
			c := *cp
			sv := *cp.Sealed
			sv.CRC ^= 1
			c.Sealed = &sv
			seal(t, h, c)
		}, 1, sealedCut + 1, SealedViewsFile},
		{"lying record: a record's CRC changed, the checkpoint re-sealed to match", func(h home.Home) {
			b, _ := os.ReadFile(mpath(h))
			i := strings.Index(string(b), `"view":"`+victim.View+`"`)
			j := i + strings.Index(string(b[i:]), `"crc":`) + len(`"crc":`)
			if b[j] == '1' {
				b[j] = '2'
			} else {
				b[j] = '1'
			}
			os.WriteFile(mpath(h), b, 0o600)
			c := *cp
			sv := *cp.Sealed
			sv.CRC = crc(b[:sv.Size])
			sv.Tail = crc(b[sv.Size-min(sv.Size, TailBytes) : sv.Size])
			c.Sealed = &sv
			seal(t, h, c)
		}, 1, sealedCut + 1, victim.View},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, deferred := range []bool{false, true} {
				h := copyHome(t, crashed)
				tc.tamper(h)
				p, err := Open(Options{Home: h, NoSync: true, SealAfter: 100, DeferWholeCheck: deferred})
				if err != nil {
					t.Fatal(err)
				}
				wantFrom := tc.from
				if deferred {
					wantFrom = tc.deferredFrom
				}
				from := p.ReplayFrom()
				if from != wantFrom {
					t.Fatalf("deferred %v: ReplayFrom %d, want %d", deferred, from, wantFrom)
				}
				if from != 1 {
					// Trusted: exactly what the checkpoint counts (records
					// a crash left past it cut).
					if fi, err := os.Stat(mpath(h)); err != nil || fi.Size() != cp.Sealed.Size {
						t.Fatalf("deferred %v: the sealed-views file after Open: %v (the checkpoint counts %d bytes)", deferred, statSize(fi, err), cp.Sealed.Size)
					}
				}
				check, checked := p.UnverifiedSealed()
				applyBatches(t, p, evs[from-1:], 50)
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				if !deferred || tc.found == "" {
					if d, err := Compare(h, want); err != nil || d != nil {
						t.Fatalf("deferred %v: views differ from a rebuild: %v %v", deferred, d, err)
					}
					if checked && tc.found == "" {
						if damaged, _, _, err := VerifySealed(context.Background(), h, check, nil); err != nil || len(damaged) > 0 {
							t.Fatalf("VerifySealed found %v (%v) in a home Open repaired", damaged, err)
						}
					}
					continue
				}
				// Deferred: Open trusted what the tail check could not see;
				// the verification after open must name it.
				if !checked {
					t.Fatal("no sealed check deferred")
				}
				damaged, _, _, err := VerifySealed(context.Background(), h, check, nil)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, d := range damaged {
					found = found || d.View == tc.found
				}
				if !found {
					t.Fatalf("VerifySealed found %v, want %s among them", damaged, tc.found)
				}
			}
		})
	}
}

// statSize is a file's size as os.Stat answered it, or its error.
func statSize(fi os.FileInfo, err error) any {
	if err != nil {
		return err
	}
	return fi.Size()
}

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// TestCheckpointVersion2Upgrade: a home whose version 2 checkpoint lists
// every view (written by a build without sealed views) is trusted as
// before; the next checkpoint seals the quiet block views (version 3), and
// that checkpoint is trusted in turn, the views identical to a rebuild.
func TestCheckpointVersion2Upgrade(t *testing.T) {
	evs, want := sealedWorkload(t)
	h := sealedHome(t, evs, sealedCut, 0)
	old, err := ReadCheckpoint(h)
	if err != nil || old == nil || old.Version != checkpointVersionV2 || old.Sealed != nil {
		t.Fatalf("a home without sealing: checkpoint %+v, %v", old, err)
	}
	p, err := Open(Options{Home: h, NoSync: true, SealAfter: 100, DeferWholeCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if from := p.ReplayFrom(); from != sealedCut+1 {
		t.Fatalf("ReplayFrom %d, want %d", from, sealedCut+1)
	}
	// The first checkpoint seals the quiet block views, no event applied.
	if err := p.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if cp, err := ReadCheckpoint(h); err != nil || cp.Sealed == nil || len(cp.Views) >= len(old.Views) {
		t.Fatalf("the first checkpoint after the upgrade: sealed %+v, %d views (%d before): %v", cp.Sealed, len(cp.Views), len(old.Views), err)
	}
	applyBatches(t, p, evs[sealedCut:], 50)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	cp, err := ReadCheckpoint(h)
	if err != nil || cp.Version != checkpointVersion || cp.Sealed == nil || len(cp.Views) >= len(old.Views) {
		t.Fatalf("after the upgrade: checkpoint version %d sealed %+v, %d views (%d before): %v", cp.Version, cp.Sealed, len(cp.Views), len(old.Views), err)
	}
	if d, err := Compare(h, want); err != nil || d != nil {
		t.Fatalf("views differ from a rebuild: %v %v", d, err)
	}
	p, err = Open(Options{Home: h, NoSync: true, SealAfter: 100})
	if err != nil {
		t.Fatal(err)
	}
	if from := p.ReplayFrom(); from != sealedTotal+1 {
		t.Fatalf("after the upgrade ReplayFrom %d, want %d", from, sealedTotal+1)
	}
	p.Close()
}

// TestClearViewsRemovesSealedViews: clearing a home's views (an in-place
// rebuild) removes the sealed views' records with the checkpoint that
// vouches for them.
func TestClearViewsRemovesSealedViews(t *testing.T) {
	evs, _ := sealedWorkload(t)
	h := sealedHome(t, evs, sealedCut, 100)
	mp := filepath.Join(h.Dir, filepath.FromSlash(SealedViewsFile))
	if fi, err := os.Stat(mp); err != nil || fi.Size() == 0 {
		t.Fatalf("no sealed views to clear: %v", err)
	}
	if err := ClearViews(h); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Fatalf("%s after ClearViews: %v", SealedViewsFile, err)
	}
}

// TestSealedViewWrittenAgain: output of a block after its end (which the
// terminal never emits, but a log may hold) goes to its sealed view: the
// view's record gives its size, the view is listed in the checkpoint
// again, and after a crash past that write a catch-up (with the whole
// check and deferred) writes it once; the views equal a rebuild.
func TestSealedViewWrittenAgain(t *testing.T) {
	block := events.Block{BlockID: "b1", Seq: 1, Mode: "block", Cmd: "ls", Status: events.BlockRunning}
	ended := block
	ended.Status = events.BlockCompleted
	payloads := []events.Payload{
		&events.PtyBlockBegin{Block: block},
		&events.PtyOutput{BlockID: "b1", SpoolOffset: 0, Data: []byte("one\n")},
		&events.PtyBlockEnd{Block: ended},
		&events.PtyOutput{BlockID: "b1", SpoolOffset: 4, Data: []byte("two\n")},
		&events.PtyOutput{BlockID: "b1", SpoolOffset: 8, Data: []byte("three\n")},
	}
	var evs []*events.Event
	for i, pl := range payloads {
		ev := events.MustNew("c1", pl)
		ev.Seq, ev.TS, ev.ID = uint64(i+1), 1770379200000+int64(i), fmt.Sprintf("0194d5e0-0000-7000-8000-%012x", i+1)
		evs = append(evs, ev)
	}
	want := rebuildInto(t, func(yield func(*events.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}, RebuildOptions{NoSync: true})
	view := PtyBlockOutputView("c1", "b1")
	for _, deferred := range []bool{false, true} {
		h := home.Home{Dir: t.TempDir()}
		p, err := Open(Options{Home: h, NoSync: true, SealAfter: 100, DeferWholeCheck: deferred})
		if err != nil {
			t.Fatal(err)
		}
		applyBatches(t, p, evs[:3], 1)
		if err := p.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if cp, _ := ReadCheckpoint(h); cp.Sealed == nil || cp.Sealed.Count != 1 {
			t.Fatalf("the ended block's view is not sealed: %+v", cp)
		} else if _, listed := cp.Views[view]; listed {
			t.Fatalf("a sealed view still listed: %v", cp.Views)
		}
		applyBatches(t, p, evs[3:4], 1)
		if err := p.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if cp, _ := ReadCheckpoint(h); cp.Views[view] != int64(len("one\ntwo\n")) {
			t.Fatalf("the view written again: checkpoint lists %d bytes of it, want %d", cp.Views[view], len("one\ntwo\n"))
		}
		// Sealed again (its block ended), then written again and a crash.
		applyBatches(t, p, evs[4:], 1)
		if err := p.CloseNoCheckpoint(); err != nil {
			t.Fatal(err)
		}
		p, err = Open(Options{Home: h, NoSync: true, SealAfter: 100, DeferWholeCheck: deferred})
		if err != nil {
			t.Fatal(err)
		}
		applyBatches(t, p, evs[p.ReplayFrom()-1:], 1)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if d, err := Compare(h, want); err != nil || d != nil {
			t.Fatalf("deferred %v: views differ from a rebuild: %v %v", deferred, d, err)
		}
	}
}

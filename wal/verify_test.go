package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

func waitLogVerified(t *testing.T, l *Log) VerifyReport {
	t.Helper()
	done, report := l.Verified()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("verification after open did not end within 30 s")
	}
	return report()
}

// flipKeepMtime xors one byte in the middle of the 4th frame of the
// log in dir, keeping the segment's mtime (bit rot, not a write), and
// returns the segment's name.
func flipKeepMtime(t *testing.T, dir string) string {
	t.Helper()
	f := frames(t, dir)[3]
	path := filepath.Join(dir, f.seg)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[f.off+f.len/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	return f.seg
}

func openVerifyAfter(t *testing.T, dir string) (*Log, error) {
	t.Helper()
	return Open(Options{Dir: dir, SegmentSize: 4096, Now: fixedNow, NoSync: true, VerifyAfterOpen: true})
}

// TestVerifyAfterOpenFindsOldDamage: with VerifyAfterOpen, Open reads
// every sealed segment that wal/VERIFIED does not list unchanged (the
// first time: all of them), then only the last one. A byte really flipped
// inside an entry of the first segment with its mtime kept (bit rot) does
// not stop such an open; the verification after open (StartVerification)
// finds it, reports a *CorruptError naming the segment, fails the log
// (appends refused) and drops the segment from the record, so the next
// open reads it and refuses the log like a plain Open. The segment files
// are byte for byte what they were.
func TestVerifyAfterOpenFindsOldDamage(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "wal")
	evs := buildLog(t, home, 300, 4096)
	segs, _ := listSegments(dir)
	l, err := openVerifyAfter(t, dir) // no record yet: every segment read, the record written
	if err != nil {
		t.Fatal(err)
	}
	l.StartVerification()
	if rep := waitLogVerified(t, l); rep.Err != nil || rep.Segments != 0 {
		t.Fatalf("first open's verification %+v: nothing should be left to verify", rep)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r := readVerified(dir); r == nil || len(r.Segments) != len(segs)-1 {
		t.Fatalf("wal/VERIFIED %+v, want %d sealed segments", r, len(segs)-1)
	}

	seg := flipKeepMtime(t, dir)
	before := snapshot(t, dir)
	l, err = openVerifyAfter(t, dir)
	if err != nil {
		t.Fatalf("open with VerifyAfterOpen: %v", err)
	}
	defer l.Close()
	if l.LastSeq() != uint64(len(evs)) || l.Err() != nil {
		t.Fatalf("last seq %d (want %d), err %v", l.LastSeq(), len(evs), l.Err())
	}
	l.StartVerification()
	rep := waitLogVerified(t, l)
	var cerr *CorruptError
	if !errors.As(rep.Err, &cerr) || !strings.Contains(cerr.Error(), seg) || rep.Segments != len(segs)-1 {
		t.Fatalf("report %+v, want a CorruptError naming %s after %d segments", rep, seg, len(segs)-1)
	}
	if err := l.Err(); !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("log err %v, want ErrFailed and ErrCorrupt", err)
	}
	ev, _ := events.New("t", &events.LabSessionStarted{SessionID: "t", Version: "v"})
	if _, err := l.Append(context.Background(), ev); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the damage was found: %v", err)
	}
	l.Close()
	after := snapshot(t, dir)
	for n, b := range before {
		if string(after[n]) != string(b) {
			t.Fatalf("segment %s changed", n)
		}
	}
	if _, err := openVerifyAfter(t, dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("next open: %v, want ErrCorrupt naming %s", err, seg)
	}
}

// TestVerifyAfterOpenRefusesAtOnce: what the record lets Open see is
// still refused at open, as by a plain Open: a sealed segment written
// since it was verified (its mtime changed) is read and its flipped byte
// found; a missing middle segment leaves a gap after the one before it; a
// sealed segment cut shorter no longer matches its record and is read.
func TestVerifyAfterOpenRefusesAtOnce(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string, segs []segmentFile) string{
		"byte flipped, mtime changed": func(t *testing.T, dir string, segs []segmentFile) string {
			seg := flipKeepMtime(t, dir)
			now := time.Now()
			os.Chtimes(filepath.Join(dir, seg), now, now)
			return seg
		},
		"middle segment missing": func(t *testing.T, dir string, segs []segmentFile) string {
			if err := os.Remove(filepath.Join(dir, segs[1].Name)); err != nil {
				t.Fatal(err)
			}
			return segs[0].Name
		},
		"sealed segment cut": func(t *testing.T, dir string, segs []segmentFile) string {
			path := filepath.Join(dir, segs[1].Name)
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(path, fi.ModTime(), fi.ModTime())
			return segs[1].Name
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, "wal")
			buildLog(t, home, 300, 4096)
			l, err := openVerifyAfter(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
			segs, _ := listSegments(dir)
			if len(segs) < 4 || readVerified(dir) == nil {
				t.Fatalf("%d segments, record %v", len(segs), readVerified(dir))
			}
			seg := damage(t, dir, segs)
			if _, err := Open(Options{Dir: dir, SegmentSize: 4096, Now: fixedNow, NoSync: true}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("plain open: %v, want ErrCorrupt", err)
			}
			if _, err := openVerifyAfter(t, dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), seg) {
				t.Fatalf("open with VerifyAfterOpen: %v, want ErrCorrupt naming %s", err, seg)
			}
		})
	}

	t.Run("sound", func(t *testing.T) {
		home := t.TempDir()
		dir := filepath.Join(home, "wal")
		buildLog(t, home, 300, 4096)
		segs, _ := listSegments(dir)
		for round := range 2 {
			l, err := openVerifyAfter(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			l.StartVerification()
			rep := waitLogVerified(t, l)
			want := 0 // the first open reads every segment itself
			if round > 0 {
				want = len(segs) - 1
			}
			if rep.Err != nil || rep.Segments != want {
				t.Fatalf("round %d: report %+v, want %d segments, no error", round, rep, want)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// Segments sealed since the record was written are read at open;
		// the verification of the recorded ones before them expects each
		// to end where the next segment (read or not) begins.
		l, err := Open(Options{Dir: dir, SegmentSize: 4096, Now: fixedNow, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 300)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for round := range 2 {
			l, err = openVerifyAfter(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			l.StartVerification()
			rep := waitLogVerified(t, l)
			now, _ := listSegments(dir)
			want := len(segs) - 1 // the recorded ones; the newer ones were read at open
			if round > 0 {
				want = len(now) - 1
			}
			if rep.Err != nil || rep.Segments != want {
				t.Fatalf("after appends, round %d: report %+v, want %d segments, no error", round, rep, want)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// Never started: Close ends it.
		l, err = openVerifyAfter(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if rep := waitLogVerified(t, l); !errors.Is(rep.Err, ErrClosed) {
			t.Fatalf("unstarted verification: %+v", rep)
		}
	})
}

// BenchmarkOpen measures Open+Close of a log of 200,000 test events in
// 4 MiB segments: "full" checks every segment (what Open did before
// VerifyAfterOpen, and still does without it), "tail" only the last.
// Reported as MB/s of log bytes.
func BenchmarkOpen(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "wal")
	l, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]*events.Event, 0, 1000)
	for i := range 200_000 {
		batch = append(batch, testEvent(i))
		if len(batch) == cap(batch) {
			if _, err := l.Append(context.Background(), batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	var size int64
	segs, _ := listSegments(dir)
	for _, s := range segs {
		if fi, err := os.Stat(filepath.Join(dir, s.Name)); err == nil {
			size += fi.Size()
		}
	}
	for _, bc := range []struct {
		name  string
		after bool
	}{{"full", false}, {"tail", true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				l, err := Open(Options{Dir: dir, NoSync: true, VerifyAfterOpen: bc.after})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

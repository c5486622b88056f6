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

// TestVerifyAfterOpenFindsOldDamage: with VerifyAfterOpen, Open reads the
// last segment only, so a byte really flipped inside an entry of the first
// segment, or a missing middle segment, does not stop it; the verification
// after open (StartVerification) finds the damage Open would have refused,
// reports it as a *CorruptError naming the segment, and fails the log:
// appends are refused from then on. A sound log verifies clean, and the
// segment files are byte for byte what they were.
func TestVerifyAfterOpenFindsOldDamage(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string) string{
		"byte flipped in the first segment": func(t *testing.T, dir string) string {
			fs := frames(t, dir)
			f := fs[3]
			b, err := os.ReadFile(filepath.Join(dir, f.seg))
			if err != nil {
				t.Fatal(err)
			}
			b[f.off+f.len/2] ^= 0x01
			if err := os.WriteFile(filepath.Join(dir, f.seg), b, 0o600); err != nil {
				t.Fatal(err)
			}
			return f.seg
		},
		"middle segment missing": func(t *testing.T, dir string) string {
			segs, err := listSegments(dir)
			if err != nil || len(segs) < 4 {
				t.Fatalf("%d segments (%v)", len(segs), err)
			}
			if err := os.Remove(filepath.Join(dir, segs[1].Name)); err != nil {
				t.Fatal(err)
			}
			return segs[0].Name // the entries missing after it
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, "wal")
			evs := buildLog(t, home, 300, 4096)
			seg := damage(t, dir)
			if _, err := Open(Options{Dir: dir, SegmentSize: 4096, Now: fixedNow, NoSync: true}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("plain open: %v, want ErrCorrupt", err)
			}
			before := snapshot(t, dir)
			l, err := Open(Options{Dir: dir, SegmentSize: 4096, Now: fixedNow, NoSync: true, VerifyAfterOpen: true})
			if err != nil {
				t.Fatalf("open with VerifyAfterOpen: %v", err)
			}
			defer l.Close()
			if l.LastSeq() != uint64(len(evs)) {
				t.Fatalf("last seq %d, want %d", l.LastSeq(), len(evs))
			}
			if l.Err() != nil {
				t.Fatalf("failed before the verification: %v", l.Err())
			}
			l.StartVerification()
			rep := waitLogVerified(t, l)
			var cerr *CorruptError
			if !errors.As(rep.Err, &cerr) || !strings.Contains(cerr.Error(), seg) {
				t.Fatalf("report err %v, want a CorruptError naming %s", rep.Err, seg)
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
		})
	}

	t.Run("sound", func(t *testing.T) {
		home := t.TempDir()
		dir := filepath.Join(home, "wal")
		buildLog(t, home, 300, 4096)
		segs, _ := listSegments(dir)
		l, err := Open(Options{Dir: dir, SegmentSize: 4096, Now: fixedNow, NoSync: true, VerifyAfterOpen: true})
		if err != nil {
			t.Fatal(err)
		}
		l.StartVerification()
		rep := waitLogVerified(t, l)
		if rep.Err != nil || rep.Segments != len(segs)-1 || rep.Bytes == 0 {
			t.Fatalf("report %+v, want %d segments, no error", rep, len(segs)-1)
		}
		appendN(t, l, 10)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Never started: Close ends it.
		l, err = Open(Options{Dir: dir, SegmentSize: 4096, Now: fixedNow, NoSync: true, VerifyAfterOpen: true})
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

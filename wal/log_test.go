package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// testEvent returns a distinct event of about 200 bytes.
func testEvent(i int) *events.Event {
	return events.MustNew(fmt.Sprintf("stream-%d", i%7), &events.WalSalvaged{
		LostSeq: uint64(i), Segment: "test", Reason: strings.Repeat("r", 40) + fmt.Sprint(i),
	})
}

func fixedNow() time.Time { return time.UnixMilli(1_700_000_000_000) }

func openT(t *testing.T, opts Options) *Log {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendN(t *testing.T, l *Log, n int) []*events.Event {
	t.Helper()
	var out []*events.Event
	for i := 0; i < n; i++ {
		ev := testEvent(i)
		seqs, err := l.Append(context.Background(), ev)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if seqs[0] != ev.Seq {
			t.Fatalf("Append returned seq %d, event has %d", seqs[0], ev.Seq)
		}
		out = append(out, ev)
	}
	return out
}

func entryBytes(t *testing.T, ev *events.Event) []byte {
	t.Helper()
	b, err := EncodeEntry(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendReadEventsAcrossSegments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: 1024})
	var want []*events.Event
	ctx := context.Background()
	for i := 0; i < 60; i++ {
		batch := []*events.Event{testEvent(len(want))}
		if i%5 == 0 {
			batch = append(batch, testEvent(len(want)+1), testEvent(len(want)+2))
		}
		seqs, err := l.Append(ctx, batch...)
		if err != nil {
			t.Fatal(err)
		}
		for j, s := range seqs {
			if s != uint64(len(want)+1+j) {
				t.Fatalf("seq %d, want %d", s, len(want)+1+j)
			}
		}
		want = append(want, batch...)
	}
	segs, _ := listSegments(dir)
	if len(segs) < 5 {
		t.Fatalf("want a multi-segment log, got %d segments", len(segs))
	}
	for _, from := range []int{1, 2, 37, len(want)} {
		i := from - 1
		for ev, err := range l.Events(uint64(from)) {
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(entryBytes(t, ev), entryBytes(t, want[i])) {
				t.Fatalf("Events(%d): seq %d differs", from, ev.Seq)
			}
			i++
		}
		if i != len(want) {
			t.Fatalf("Events(%d) yielded up to %d, want %d", from, i, len(want))
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openT(t, Options{Dir: dir, SegmentSize: 1024})
	if l2.LastSeq() != uint64(len(want)) || l2.FirstSeq() != 1 {
		t.Fatalf("reopened first %d last %d, want 1 %d", l2.FirstSeq(), l2.LastSeq(), len(want))
	}
	if l2.Repaired() != nil {
		t.Fatalf("clean log was repaired: %+v", l2.Repaired())
	}
	for i, w := range want {
		ev, err := l2.Read(uint64(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(entryBytes(t, ev), entryBytes(t, w)) {
			t.Fatalf("Read(%d) differs", i+1)
		}
	}
	if _, err := l2.Read(uint64(len(want) + 1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read past end: %v", err)
	}
	rep, err := Verify(dir)
	if err != nil || rep.Entries != uint64(len(want)) || rep.Segments != len(segs) || rep.TornTail != nil {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
}

func TestAppendRejectsInvalidEventAndWritesNothing(t *testing.T) {
	l := openT(t, Options{Dir: filepath.Join(t.TempDir(), "wal")})
	ev := testEvent(1)
	ev.Type = ""
	if _, err := l.Append(context.Background(), testEvent(0), ev); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("err %v, want ErrInvalidEvent", err)
	}
	if l.LastSeq() != 0 || l.Err() != nil {
		t.Fatalf("last %d err %v after a rejected append", l.LastSeq(), l.Err())
	}
	appendN(t, l, 1)
	if l.LastSeq() != 1 {
		t.Fatalf("last %d", l.LastSeq())
	}
}

func TestConcurrentAppendersGroupCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	var applied []uint64
	var mu sync.Mutex
	l := openT(t, Options{Dir: dir, SegmentSize: 16 << 10, Apply: func(evs []*events.Event) error {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			applied = append(applied, ev.Seq)
		}
		return nil
	}})
	const workers, per = 16, 40
	var wg sync.WaitGroup
	got := make([][]uint64, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				seqs, err := l.Append(context.Background(), testEvent(w*per+i))
				if err != nil {
					t.Error(err)
					return
				}
				// Acknowledged means applied.
				mu.Lock()
				if len(applied) < int(seqs[0]) || applied[seqs[0]-1] != seqs[0] {
					t.Errorf("seq %d acknowledged before applied", seqs[0])
				}
				mu.Unlock()
				got[w] = append(got[w], seqs[0])
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, g := range got {
		for _, s := range g {
			if seen[s] {
				t.Fatalf("seq %d acknowledged twice", s)
			}
			seen[s] = true
		}
	}
	if len(seen) != workers*per || l.LastSeq() != workers*per {
		t.Fatalf("%d seqs, last %d", len(seen), l.LastSeq())
	}
	st := l.Stats()
	if st.FsyncP50Seconds <= 0 || st.FsyncP99Seconds < st.FsyncP50Seconds || st.Appends != workers*per || st.Groups == 0 || st.Groups > st.Appends || st.GroupSize.Count != st.Groups || st.FsyncSeconds.Count != st.Groups {
		t.Fatalf("stats %+v", st)
	}
}

// countingWriter counts the seam's calls.
type countingWriter struct {
	Writer
	dirSyncs int
}

func (c *countingWriter) SyncDir() error { c.dirSyncs++; return c.Writer.SyncDir() }

func TestDirectoryFsyncedExactlyWhenSegmentCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: 700})
	cw := &countingWriter{Writer: l.w}
	l.w = cw // before any append; the committer reads l.w only in commit
	segsBefore := 1
	for i := 0; i < 40; i++ {
		n := 1 + i%4
		var evs []*events.Event
		for j := 0; j < n; j++ {
			evs = append(evs, testEvent(i*4+j))
		}
		before := cw.dirSyncs
		if _, err := l.Append(context.Background(), evs...); err != nil {
			t.Fatal(err)
		}
		segs, _ := listSegments(dir)
		created := len(segs) > segsBefore
		if synced := cw.dirSyncs > before; synced != created {
			t.Fatalf("append %d: segment created %v, directory fsynced %v", i, created, synced)
		}
		segsBefore = len(segs)
	}
	if segsBefore < 5 {
		t.Fatalf("only %d segments", segsBefore)
	}
}

func TestLockedInProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	openT(t, Options{Dir: dir})
	_, err := Open(Options{Dir: dir})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second open: %v", err)
	}
}

func TestCloseFailsPendingAndLaterAppends(t *testing.T) {
	l := openT(t, Options{Dir: filepath.Join(t.TempDir(), "wal")})
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), testEvent(9)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	// The lock is released.
	l2 := openT(t, Options{Dir: l.Dir()})
	if l2.LastSeq() != 3 {
		t.Fatalf("last %d", l2.LastSeq())
	}
}

func TestApplyErrorAndPanicFailTheLog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		apply func([]*events.Event) error
	}{
		{"error", func([]*events.Event) error { return errors.New("view full") }},
		{"panic", func([]*events.Event) error { panic("projection bug") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openT(t, Options{Dir: filepath.Join(t.TempDir(), "wal"), Apply: tc.apply})
			_, err := l.Append(context.Background(), testEvent(1))
			if !errors.Is(err, ErrFailed) || l.Err() == nil {
				t.Fatalf("append: %v, Err %v", err, l.Err())
			}
			if _, err := l.Append(context.Background(), testEvent(2)); !errors.Is(err, ErrFailed) {
				t.Fatalf("second append: %v", err)
			}
			if l.LastSeq() != 0 {
				t.Fatalf("last %d", l.LastSeq())
			}
		})
	}
}

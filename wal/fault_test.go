package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// callCounter counts every seam call made after a fault.
type callCounter struct {
	Writer
	writes, syncs, dirSyncs atomic.Int32
}

func (c *callCounter) WriteBatch(first uint64, e [][]byte) (bool, error) {
	c.writes.Add(1)
	return c.Writer.WriteBatch(first, e)
}
func (c *callCounter) Sync() error    { c.syncs.Add(1); return c.Writer.Sync() }
func (c *callCounter) SyncDir() error { c.dirSyncs.Add(1); return c.Writer.SyncDir() }

func TestWriteAndFsyncFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		arm   func(f *Faults)
		cause error
		// entries of the failed group found after reopen (written to the
		// page cache before the failure, never acknowledged), and whether
		// reopen repairs a torn frame.
		survive  int
		repaired bool
	}{
		{"write-enospc", func(f *Faults) { f.FailWrite(syscall.ENOSPC) }, syscall.ENOSPC, 0, false},
		{"short-write", func(f *Faults) { f.ShortWrite(syscall.ENOSPC) }, syscall.ENOSPC, 2, true},
		{"fsync-eio", func(f *Faults) { f.FailSync(syscall.EIO) }, syscall.EIO, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, "wal")
			faults := &Faults{}
			l, err := Open(Options{Dir: dir, Faults: faults, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			before := appendN(t, l, 5)
			cc := &callCounter{Writer: l.w}
			l.w = cc
			tc.arm(faults)
			group := []*events.Event{testEvent(100), testEvent(101), testEvent(102)}
			seqs, err := l.Append(context.Background(), group...)
			if !errors.Is(err, ErrFailed) || !errors.Is(err, tc.cause) || seqs != nil {
				t.Fatalf("failed append returned %v, %v", seqs, err)
			}
			if faults.Fired() != 1 || !errors.Is(l.Err(), tc.cause) || l.LastSeq() != 5 {
				t.Fatalf("fired %d, Err %v, last %d", faults.Fired(), l.Err(), l.LastSeq())
			}
			// Every later appender gets the error; nothing is written or
			// fsynced again (an fsync is never retried).
			w0, s0 := cc.writes.Load(), cc.syncs.Load()
			var wg sync.WaitGroup
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := l.Append(context.Background(), testEvent(200+i)); !errors.Is(err, ErrFailed) {
						t.Errorf("append after failure: %v", err)
					}
				}()
			}
			wg.Wait()
			if cc.writes.Load() != w0 || cc.syncs.Load() != s0 {
				t.Fatalf("seam called after failure: writes %d→%d syncs %d→%d", w0, cc.writes.Load(), s0, cc.syncs.Load())
			}
			st := l.Stats()
			if st.Failed == "" || st.Appends != 5 {
				t.Fatalf("stats %+v", st)
			}
			if tc.name == "fsync-eio" && (st.FsyncErrors != 1 || st.LastFsyncError == "") {
				t.Fatalf("fsync error not counted: %+v", st)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close of a failed log: %v", err)
			}
			// A failed log keeps its preallocated zeros (Close does not
			// touch it): the torn frame of a short write lies among them.
			if _, b := tailSegment(t, dir); len(b)%preallocUnit != 0 {
				t.Fatalf("failed log's tail segment is %d bytes, want preallocated space", len(b))
			}

			l2, err := Open(Options{Dir: dir, Now: fixedNow})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l2.Close()
			if (l2.Repaired() != nil) != tc.repaired {
				t.Fatalf("repaired %+v", l2.Repaired())
			}
			if tc.repaired {
				// Exactly the half frame of the group's last entry.
				last := group[len(group)-1] // its seq was assigned when written
				if last.Seq != uint64(5+tc.survive+1) {
					t.Fatalf("torn entry has seq %d", last.Seq)
				}
				e := entryBytes(t, last)
				frame := append(binary.AppendUvarint(nil, uint64(len(e))), e...)
				q, err := os.ReadFile(filepath.Join(home, "quarantine", l2.Repaired().Quarantine))
				if err != nil || !bytes.Equal(q, frame[:len(frame)/2]) {
					t.Fatalf("quarantined %d bytes (%v), want the %d of the torn frame", len(q), err, len(frame)/2)
				}
			}
			want := uint64(5 + tc.survive)
			if tc.repaired {
				want++
			}
			if l2.LastSeq() != want {
				t.Fatalf("last after reopen %d, want %d", l2.LastSeq(), want)
			}
			for i, w := range before {
				ev, err := l2.Read(uint64(i + 1))
				if err != nil || !bytes.Equal(entryBytes(t, ev), entryBytes(t, w)) {
					t.Fatalf("acknowledged seq %d: %v", i+1, err)
				}
			}
			if _, err := l2.Append(context.Background(), testEvent(300)); err != nil {
				t.Fatalf("append after reopen: %v", err)
			}
		})
	}
}

func TestDirFsyncFailureOnNewSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	faults := &Faults{}
	l := openT(t, Options{Dir: dir, SegmentSize: 600, Faults: faults})
	faults.FailDirSync(syscall.EIO)
	var acked uint64
	for i := 0; i < 10; i++ {
		seqs, err := l.Append(context.Background(), testEvent(i))
		if err != nil {
			if !errors.Is(err, syscall.EIO) || faults.Fired() != 1 {
				t.Fatalf("append %d: %v", i, err)
			}
			segs, _ := listSegments(dir)
			if len(segs) != 2 {
				t.Fatalf("failure without a new segment: %d segments", len(segs))
			}
			if acked != uint64(i) {
				t.Fatalf("acked %d", acked)
			}
			return
		}
		acked = seqs[0]
	}
	t.Fatal("the directory fsync of the new segment never happened")
}

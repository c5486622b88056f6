package wal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// gatedWriter holds every Sync until the test releases it, and records
// what each Sync and SyncDir covered: the pipelined committer writes later
// groups while an fsync runs, and none of them may be acknowledged before
// an fsync that started after their write returned.
type gatedWriter struct {
	Writer
	gate    chan error    // each Sync waits for one value: nil runs the real fsync, else fails
	entered chan struct{} // a Sync is waiting at the gate

	mu        sync.Mutex
	writes    int
	written   uint64   // highest sequence a returned WriteBatch wrote
	created   []uint64 // first sequence of each WriteBatch that created a segment (or more)
	synced    uint64   // highest sequence written before the last successful Sync began
	dirSynced int      // len(created) before the last successful SyncDir began
	syncs     int
}

func (g *gatedWriter) WriteBatch(first uint64, e [][]byte) (bool, error) {
	cycled, err := g.Writer.WriteBatch(first, e)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes++
	if err == nil {
		g.written = first + uint64(len(e)) - 1
		if cycled {
			g.created = append(g.created, first)
		}
	}
	return cycled, err
}

func (g *gatedWriter) Sync() error {
	g.mu.Lock()
	upTo := g.written
	g.syncs++
	g.mu.Unlock()
	if g.gate != nil {
		g.entered <- struct{}{}
		if err := <-g.gate; err != nil {
			return err
		}
	}
	if err := g.Writer.Sync(); err != nil {
		return err
	}
	g.mu.Lock()
	g.synced = max(g.synced, upTo)
	g.mu.Unlock()
	return nil
}

func (g *gatedWriter) SyncDir() error {
	g.mu.Lock()
	n := len(g.created)
	g.mu.Unlock()
	if err := g.Writer.SyncDir(); err != nil {
		return err
	}
	g.mu.Lock()
	g.dirSynced = max(g.dirSynced, n)
	g.mu.Unlock()
	return nil
}

// check is called from Apply, after the fsync and before any
// acknowledgement: every event handed over must be covered by an fsync
// that began after its write, and every segment created at or before it
// by a directory fsync.
func (g *gatedWriter) check(evs []*events.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	top := evs[len(evs)-1].Seq
	if top > g.synced {
		return fmt.Errorf("seq %d applied before an fsync covered it (synced up to %d)", top, g.synced)
	}
	need := sort.Search(len(g.created), func(i int) bool { return g.created[i] > top })
	if need > g.dirSynced {
		return fmt.Errorf("seq %d applied before the directory fsync of segment %d", top, g.created[need-1])
	}
	return nil
}

type appendResult struct {
	seqs []uint64
	err  error
}

// waitFor polls cond with a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPipelinedWriteNoAckBeforeFsync: while the first group's fsync is held,
// the committer writes the next group (pipelining), yet no appender is
// acknowledged and LastSeq does not move; a successful fsync then
// acknowledges all, a failed one none — and after a failure nothing is
// fsynced again, not even the group written during the failed fsync.
func TestPipelinedWriteNoAckBeforeFsync(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync-fails=%v", fail), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			l, err := Open(Options{Dir: dir, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			g := &gatedWriter{Writer: l.w, gate: make(chan error), entered: make(chan struct{}, 16)}
			l.w = g // before any append
			results := make(chan appendResult, 16)
			appendOne := func(i int) {
				seqs, err := l.Append(context.Background(), testEvent(i))
				results <- appendResult{seqs, err}
			}
			go appendOne(0)
			<-g.entered // group 1 written, its fsync held
			const more = 8
			for i := 1; i <= more; i++ {
				go appendOne(i)
			}
			waitFor(t, "a second group written during the held fsync", func() bool {
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.written == more+1
			})
			select {
			case r := <-results:
				t.Fatalf("acknowledged during a held fsync: %+v", r)
			default:
			}
			if l.LastSeq() != 0 {
				t.Fatalf("LastSeq %d during a held fsync", l.LastSeq())
			}
			if !fail {
				g.gate <- nil
				<-g.entered // the second fsync covers the groups written meanwhile
				g.gate <- nil
				seen := map[uint64]bool{}
				for i := 0; i <= more; i++ {
					r := <-results
					if r.err != nil || len(r.seqs) != 1 {
						t.Fatalf("append: %+v", r)
					}
					seen[r.seqs[0]] = true
				}
				for s := uint64(1); s <= more+1; s++ {
					if !seen[s] {
						t.Fatalf("seq %d not acknowledged: %v", s, seen)
					}
				}
				if l.LastSeq() != more+1 || g.syncs != 2 {
					t.Fatalf("LastSeq %d, %d fsyncs", l.LastSeq(), g.syncs)
				}
				return
			}
			g.mu.Lock()
			w0 := g.writes
			g.mu.Unlock()
			g.gate <- syscall.EIO
			for i := 0; i <= more; i++ {
				r := <-results
				if !errors.Is(r.err, ErrFailed) || !errors.Is(r.err, syscall.EIO) || r.seqs != nil {
					t.Fatalf("append after failed fsync: %+v", r)
				}
			}
			g.mu.Lock()
			syncs, writes := g.syncs, g.writes
			g.mu.Unlock()
			if syncs != 1 || writes != w0 || l.LastSeq() != 0 || !errors.Is(l.Err(), syscall.EIO) {
				t.Fatalf("after failure: %d fsyncs, %d writes, LastSeq %d, Err %v", syncs, writes, l.LastSeq(), l.Err())
			}
			if st := l.Stats(); st.Appends != 0 || st.FsyncErrors != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestPipelinedSegmentsDurableBeforeAck: many appenders on tiny segments,
// so that groups are written while earlier ones are fsynced and segments
// are created all the time: Apply (after the fsyncs, before any
// acknowledgement) checks that every event it gets was covered by an
// fsync begun after its write and every segment up to it by a directory
// fsync; the log is gapless and complete afterwards.
func TestPipelinedSegmentsDurableBeforeAck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	var g *gatedWriter
	var applyErr atomic.Value
	l, err := Open(Options{Dir: dir, SegmentSize: 2000, Now: fixedNow, Apply: func(evs []*events.Event) error {
		if err := g.check(evs); err != nil {
			applyErr.CompareAndSwap(nil, err)
			return err
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	g = &gatedWriter{Writer: l.w}
	l.w = g
	const workers, per = 16, 40
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := l.Append(context.Background(), testEvent(w*per+i)); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := applyErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	created, writes, syncs := len(g.created), g.writes, g.syncs
	g.mu.Unlock()
	if l.LastSeq() != workers*per || created < 10 || syncs == 0 || syncs > writes {
		t.Fatalf("LastSeq %d, %d segments created, %d writes, %d fsyncs", l.LastSeq(), created, writes, syncs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ds, err := scanDir(dir, false, nil)
	if err != nil || len(ds.Bad) != 0 || ds.Last != workers*per || len(ds.Segments) < created+1 {
		t.Fatalf("scan: %v, bad %v, last %d, %d segments, %d created", err, ds.Bad, ds.Last, len(ds.Segments), created)
	}
}

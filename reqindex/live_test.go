package reqindex_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/reqindex"
	"github.com/cmlab/cmlab/wal"
)

// sessionCounts is a third derived file, as small as one can be, built on
// what the index and the Lab store share (DerivedFile and Live): for each
// session id, how many lab.session.started events named it and the seq
// of the last one, with the covered seq and id in bucket "meta".
type sessionCounts map[string][2]uint64 // session → {count, last seq}

var (
	scSessions = []byte("sessions")
	scMeta     = []byte("meta")
)

func (b sessionCounts) Add(ev *events.Event) {
	p, err := ev.Decode()
	if s, ok := p.(*events.LabSessionStarted); err == nil && ok {
		c := b[s.SessionID]
		b[s.SessionID] = [2]uint64{c[0] + 1, ev.Seq}
	}
}

func (b sessionCounts) Write(db *bolt.DB, seq uint64, id string) error {
	return db.Update(func(tx *bolt.Tx) error {
		sb := tx.Bucket(scSessions)
		for s, c := range b {
			var old [2]uint64
			if v := sb.Get([]byte(s)); len(v) == 16 {
				old[0] = binary.BigEndian.Uint64(v)
			}
			v := binary.BigEndian.AppendUint64(nil, old[0]+c[0])
			if err := sb.Put([]byte(s), binary.BigEndian.AppendUint64(v, c[1])); err != nil {
				return err
			}
		}
		meta := tx.Bucket(scMeta)
		if err := meta.Put([]byte("covered"), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return err
		}
		return meta.Put([]byte("covered_id"), []byte(id))
	})
}

func (b sessionCounts) Reset() { clear(b) }

func (b sessionCounts) Len() int { return len(b) }

// Before: b's counts, then newer's (whose last seq is the later).
func (b sessionCounts) Before(newer sessionCounts) sessionCounts {
	for s, c := range newer {
		o := b[s]
		b[s] = [2]uint64{o[0] + c[0], c[1]}
	}
	return b
}

func createSessionCounts(path string) (*bolt.DB, error) {
	os.Remove(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{scSessions, scMeta} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// readSessionCounts is what db holds: counts and the covered seq.
func readSessionCounts(t *testing.T, db *bolt.DB) (map[string][2]uint64, uint64) {
	t.Helper()
	got := map[string][2]uint64{}
	var covered uint64
	err := db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(scMeta).Get([]byte("covered")); len(v) == 8 {
			covered = binary.BigEndian.Uint64(v)
		}
		return tx.Bucket(scSessions).ForEach(func(k, v []byte) error {
			got[string(k)] = [2]uint64{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, covered
}

// appendSessions appends n lab.session.started events, cycling through
// three session ids, and returns them (their seqs set by the log); want
// counts them.
func appendSessions(t *testing.T, l *wal.Log, n int, want map[string][2]uint64) []*events.Event {
	t.Helper()
	var evs []*events.Event
	var names []string
	for i := range n {
		s := fmt.Sprintf("lab_%d", i%3)
		names = append(names, s)
		ev, err := events.New(s, &events.LabSessionStarted{SessionID: s, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if _, err := l.Append(context.Background(), evs...); err != nil { // sets each ev.Seq
		t.Fatal(err)
	}
	for i, ev := range evs {
		c := want[names[i]]
		want[names[i]] = [2]uint64{c[0] + 1, ev.Seq}
	}
	return evs
}

// TestLiveDerivedFile drives a derived file through what DerivedFile.Open
// and Live own: the file made and caught up at open; the changes observed
// written by a flush; a failed write's batch put back in front of what
// came after it (and no back-pressure while the file cannot be written);
// a rebuild from the log swapped in while the old file serves; Close (the
// last changes written, the file closed once, every flush or rebuild
// after it refused); the file trusted and caught up at the next open, and
// made new when it names an event the log does not hold.
func TestLiveDerivedFile(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(wal.Options{Dir: filepath.Join(dir, "wal"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := map[string][2]uint64{}
	appendSessions(t, l, 10, want)

	path := filepath.Join(dir, "sessions.db")
	file := &reqindex.DerivedFile{Name: "sessions", Log: l, Batch: 4, NoSync: true,
		NewBatch: func() reqindex.Batch { return sessionCounts{} }, Create: createSessionCounts}
	f, err := file.Open(context.Background(), path, "sessions", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Made || f.Covered != l.LastSeq() {
		t.Fatalf("opened with a rebuild asked for: made %v, covering %d of %d", f.Made, f.Covered, l.LastSeq())
	}
	db := f.DB

	errDisk := errors.New("injected: write failed")
	var failing atomic.Bool
	var installs, closes atomic.Int32
	var errClosed = errors.New("sessions: closed")
	live := reqindex.StartLive(reqindex.LiveOptions[sessionCounts]{File: file, Path: path,
		FlushInterval: time.Hour, FlushAt: 1000, MaxPending: 2,
		NewPending: func() sessionCounts { return sessionCounts{} },
		Write: func(b sessionCounts, seq uint64, id string) error {
			if failing.Load() {
				return errDisk
			}
			return b.Write(db, seq, id)
		},
		Install:   func(n *bolt.DB) { installs.Add(1); db.Close(); db = n },
		CloseFile: func() error { closes.Add(1); return db.Close() },
		ErrClosed: errClosed,
	}, f.Covered, f.CoveredID, "")
	live.NoVerification()
	observe := func(evs []*events.Event) {
		for _, ev := range evs {
			live.Observe(ev, func(p, _ sessionCounts) bool { p.Add(ev); return true })
		}
	}

	// Flushed: the file holds what was observed, up to its seq.
	observe(appendSessions(t, l, 5, want))
	if err := live.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, c := readSessionCounts(t, db); fmt.Sprint(got) != fmt.Sprint(want) || c != l.LastSeq() || live.State().Durable != c {
		t.Fatalf("after a flush the file holds %v covering %d (Durable %d), want %v covering %d", got, c, live.State().Durable, want, l.LastSeq())
	}

	// A failed write: kept as Err, its batch put back in front; Observe
	// does not wait for a flusher that cannot write (MaxPending is 2).
	failing.Store(true)
	observe(appendSessions(t, l, 4, want))
	before := live.State().Durable
	if err := live.Flush(); !errors.Is(err, errDisk) || !errors.Is(live.State().Err, errDisk) {
		t.Fatalf("Flush = %v, Err = %v, want the write's failure", err, live.State().Err)
	}
	more := appendSessions(t, l, 5, want)
	observed := make(chan struct{})
	go func() { observe(more); close(observed) }()
	select {
	case <-observed:
	case <-time.After(10 * time.Second):
		t.Fatal("Observe waited for a flusher that cannot write")
	}
	if live.State().Durable != before || live.State().Unflushed != 3 {
		t.Fatalf("after a failed write: Durable %d (want %d), Unflushed %d (want 3 sessions)", live.State().Durable, before, live.State().Unflushed)
	}
	failing.Store(false)
	if err := live.Flush(); err != nil || live.State().Err != nil {
		t.Fatalf("Flush = %v, Err = %v after the disk came back", err, live.State().Err)
	}
	if got, c := readSessionCounts(t, db); fmt.Sprint(got) != fmt.Sprint(want) || c != l.LastSeq() {
		t.Fatalf("after the failed write was retried the file holds %v covering %d, want %v covering %d", got, c, want, l.LastSeq())
	}

	// Rebuilt from the log beside the serving file, and swapped in.
	observe(appendSessions(t, l, 2, want))
	if dirSync, err := live.Rebuild("test: rebuild"); err != nil || dirSync != nil {
		t.Fatalf("Rebuild = %v, %v", dirSync, err)
	}
	if installs.Load() != 1 || live.State().Rebuilt != "test: rebuild" {
		t.Fatalf("after Rebuild: %d installs, Rebuilt %q", installs.Load(), live.State().Rebuilt)
	}
	if _, err := os.Stat(path + ".rebuild"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rebuild's file is left beside the file: %v", err)
	}

	// Close writes what is pending, closes the file once; then nothing.
	observe(appendSessions(t, l, 3, want))
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if closes.Load() != 1 {
		t.Fatalf("CloseFile called %d times", closes.Load())
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, c := readSessionCounts(t, db); fmt.Sprint(got) != fmt.Sprint(want) || c != l.LastSeq() {
		t.Fatalf("after Close the file holds %v covering %d, want %v covering %d", got, c, want, l.LastSeq())
	}
	db.Close()
	last := live.State().Observed
	observe(appendSessions(t, l, 1, want))
	if live.State().Observed != last {
		t.Fatal("an event observed after Close moved the observed seq")
	}
	if err := live.Flush(); !errors.Is(err, errClosed) {
		t.Fatalf("Flush after Close = %v, want %v", err, errClosed)
	}
	if _, err := live.Rebuild("after close"); err == nil || installs.Load() != 1 {
		t.Fatalf("Rebuild after Close = %v (%d installs), want it refused", err, installs.Load())
	}
	if _, err := os.Stat(path + ".rebuild"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused rebuild left its file: %v", err)
	}
	if err := live.Close(); err != nil || closes.Load() != 1 {
		t.Fatalf("a second Close = %v and closed the file %d times", err, closes.Load())
	}
	if _, verr := live.Verified(); verr() != nil {
		t.Fatalf("Verified after NoVerification = %v", verr())
	}

	// Opened again: trusted, and caught up with the event appended after
	// Close.
	f, err = file.Open(context.Background(), path, "sessions", trustSessionCounts(path))
	if err != nil {
		t.Fatal(err)
	}
	if got, c := readSessionCounts(t, f.DB); f.Made || fmt.Sprint(got) != fmt.Sprint(want) || c != l.LastSeq() || f.Covered != c {
		t.Fatalf("reopened: made %v (%s), holding %v covering %d (Covered %d), want %v covering %d", f.Made, f.Why, got, c, f.Covered, want, l.LastSeq())
	}
	if err := f.DB.Update(func(tx *bolt.Tx) error { return tx.Bucket(scMeta).Put([]byte("covered_id"), []byte("another event")) }); err != nil {
		t.Fatal(err)
	}
	f.DB.Close()

	// Claiming an event the log does not hold: made new.
	f, err = file.Open(context.Background(), path, "sessions", trustSessionCounts(path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.DB.Close()
	if got, _ := readSessionCounts(t, f.DB); !f.Made || !f.Found || !strings.Contains(f.Why, "another event") || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a file naming another event: made %v, found %v, why %q, holding %v", f.Made, f.Found, f.Why, got)
	}
}

// trustSessionCounts opens the file at path and reads its covered seq
// and id (DerivedFile.Open's trust).
func trustSessionCounts(path string) func() (*bolt.DB, uint64, string, error) {
	return func() (*bolt.DB, uint64, string, error) {
		var covered uint64
		var id string
		db, err := reqindex.OpenFile(path, "sessions", &bolt.Options{NoSync: true}, func(db *bolt.DB) error {
			return db.View(func(tx *bolt.Tx) error {
				c := tx.Bucket(scMeta).Get([]byte("covered"))
				if len(c) != 8 {
					return errors.New("covered seq missing")
				}
				covered, id = binary.BigEndian.Uint64(c), string(tx.Bucket(scMeta).Get([]byte("covered_id")))
				return nil
			})
		})
		return db, covered, id, err
	}
}

package wal

// Adversarial tests: edges of the log's contract that the other tests do
// not reach — entries larger than a segment, tiny segments, Close racing
// appenders and other Close calls, a follower under 16 appenders across
// segment cycles, a tail ending exactly at a preallocation unit, faults at
// the Nth seam call, Verify and Stat of a log being written, and Salvage
// of a middle segment.

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// blockingSyncWriter holds every Sync until release is closed.
type blockingSyncWriter struct {
	Writer
	entered chan struct{} // one value per Sync that reached the gate
	release chan struct{}
}

func (b *blockingSyncWriter) Sync() error {
	b.entered <- struct{}{}
	<-b.release
	return b.Writer.Sync()
}

// A Close that finds the log already closing must not return before the
// log is closed: its caller may reopen the log at once.
func TestAdvConcurrentCloseReturnsAfterTheLockIsReleased(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := Open(Options{Dir: dir, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	bw := &blockingSyncWriter{Writer: l.w, entered: make(chan struct{}, 64), release: make(chan struct{})}
	l.w = bw // before any append
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), testEvent(1))
		appended <- err
	}()
	<-bw.entered // the group's fsync is held: the first Close waits for it
	firstClosed := make(chan error, 1)
	go func() { firstClosed <- l.Close() }()
	waitFor(t, "the first Close to mark the log closed", func() bool {
		l.sendMu.RLock()
		defer l.sendMu.RUnlock()
		return l.closed
	})
	secondClosed := make(chan error, 1)
	go func() { secondClosed <- l.Close() }()
	select {
	case err := <-secondClosed:
		// It returned while the first Close is still waiting for the
		// fsync: the log is not closed, its lock is still held.
		l2, oerr := Open(Options{Dir: dir, Now: fixedNow})
		if oerr == nil {
			l2.Close()
		}
		close(bw.release)
		<-firstClosed
		t.Fatalf("second Close returned %v while the first was still closing; an Open right after it: %v", err, oerr)
	case <-time.After(200 * time.Millisecond):
	}
	close(bw.release)
	if err := <-appended; err != nil {
		t.Fatalf("append whose fsync Close waited for: %v", err)
	}
	if err := <-firstClosed; err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := <-secondClosed; err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l2, err := Open(Options{Dir: dir, Now: fixedNow})
	if err != nil {
		t.Fatalf("Open after both Close calls returned: %v", err)
	}
	defer l2.Close()
	if l2.LastSeq() != 1 || l2.Repaired() != nil {
		t.Fatalf("reopened: last %d repaired %+v", l2.LastSeq(), l2.Repaired())
	}
	if _, err := l.Append(context.Background(), testEvent(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append on the closed handle: %v", err)
	}
}

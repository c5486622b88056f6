package reqindex

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StartVerification starts the verification after open
// (Options.VerifyAfterOpen) in a goroutine that Close ends and waits for.
// Later calls, and calls when there is nothing to verify, do nothing.
func (x *Index) StartVerification() {
	x.verifyGo.Do(func() { go x.verifyLoop() })
}

// Verified returns a channel closed when the verification after open
// (Options.VerifyAfterOpen) has ended — at once when there was none, at
// Close when it never started — and its outcome: nil when the file passed, or was rebuilt from the log after
// failing (Rebuilt then says why); otherwise why the check or the rebuild
// did not finish (Close, a log whose start is compacted away).
func (x *Index) Verified() (<-chan struct{}, func() error) {
	return x.verified, func() error {
		<-x.verified
		return x.verifyErr
	}
}

// verifyLoop is the verification after open: the page check and every
// entry's CRC (checkAll); on failure the file is rebuilt in place from the
// log (rebuildLive). It ends early when the index closes.
func (x *Index) verifyLoop() {
	defer close(x.verified)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-x.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Only this goroutine replaces x.db, so reading it here needs no lock;
	// bbolt lets this read transaction run beside the flusher's writes.
	// The check reads every page: its resident share is dropped as it
	// goes (rss.go).
	cerr := WhileTrimming(x.db, 100*time.Millisecond, func() error { return checkAll(x.db) })
	if cerr == nil {
		return
	}
	if err := ctx.Err(); err != nil {
		x.verifyErr = err
		return
	}
	x.verifyErr = x.rebuildLive(ctx, cerr.Error())
}

// rebuildLive rebuilds the index from the log into a new file beside the
// old one while the index serves from the old one, then, holding mu with
// no flush writing, writes the ids flushed meanwhile, swaps the new file
// in (rename, directory fsync) and closes the old one. Lookups of entries
// that fail their CRC in the old file meanwhile answer an error ("do not
// act"). A log whose start was compacted away cannot rebuild it: the old
// file, possibly the only copy of old answers, is kept and the error
// returned.
func (x *Index) rebuildLive(ctx context.Context, reason string) error {
	l := x.opts.Log
	if l.FirstSeq() > 1 {
		return fmt.Errorf("reqindex: %s fails its check (%s) and the log is compacted: not rebuilt (fix: stop the daemon, `cmlab rebuild --archive DIR`)", x.opts.Path, reason)
	}
	x.mu.Lock()
	upTo := x.covered
	x.mu.Unlock()
	r, err := x.file().StartRebuild(ctx, x.opts.Path, upTo)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for x.flushing != nil {
		x.drained.Wait()
	}
	if x.closed {
		r.Abort()
		return ErrClosed
	}
	// Flushed since upTo: in the log (covered ≤ observed ≤ its last seq).
	db, err := r.Finish(ctx, x.covered)
	if db == nil {
		return err
	}
	if err != nil { // in place, but the rename may not survive a crash
		x.flushErr = errors.Join(x.flushErr, err)
	}
	old := x.db
	x.dbMu.Lock()
	x.db = db
	x.dbMu.Unlock()
	x.rebuilt = "verification after open: " + reason
	old.Close()
	return nil
}

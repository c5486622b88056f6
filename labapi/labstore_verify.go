package labapi

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/reqindex"
)

// The Lab store's check after open and its rebuild in place (labStore).

// startVerification checks the store's pages and every value's CRC in a
// goroutine (Close ends and waits for it); on failure the file is
// rebuilt from the log while the old one serves. Later calls, and calls
// for a store made new at open, do nothing.
func (st *labStore) startVerification() {
	st.verifyMu.Lock()
	defer st.verifyMu.Unlock()
	if st.verifyOn {
		return
	}
	st.verifyOn = true
	go func() {
		defer close(st.verified)
		// The check reads every page: its resident share is dropped as
		// it goes (reqindex.WhileTrimming).
		st.dbMu.RLock()
		err := reqindex.WhileTrimming(st.db, 100*time.Millisecond, func() error { return checkLabStore(st.db) })
		st.dbMu.RUnlock()
		if err == nil {
			return
		}
		st.mu.Lock()
		st.damagedLocked(fmt.Errorf("check after open: %w", err))
		st.mu.Unlock()
		st.rebuildWG.Wait()
	}()
}

// damagedLocked starts the rebuild of a damaged file (once at a time);
// mu is held.
func (st *labStore) damagedLocked(why error) {
	if st.rebuilding || st.closed {
		return
	}
	st.rebuilding = true
	st.warn("Lab store damaged, rebuilding it from the log", "file", filepath.Base(st.path), "reason", why.Error())
	st.rebuildWG.Add(1)
	go func() {
		defer st.rebuildWG.Done()
		err := st.rebuildLive(why.Error())
		st.mu.Lock()
		st.rebuilding = false
		st.mu.Unlock()
		if err != nil {
			st.warn("Lab store not rebuilt; retried at the next damage found or start", "error", err.Error())
		}
	}()
}

// rebuildLive rebuilds the store from the log into a new file beside the
// old one while the old one serves, then, holding mu with no flush
// writing, writes the changes flushed meanwhile, swaps the new file in
// (rename, directory fsync) and closes the old one.
func (st *labStore) rebuildLive(reason string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-st.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	st.mu.Lock()
	upTo := st.covered
	st.mu.Unlock()
	r, err := st.file().StartRebuild(ctx, st.path, upTo)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.flushing != nil {
		st.drained.Wait()
	}
	if st.closed {
		r.Abort()
		return errLabStoreClosed
	}
	// Flushed since upTo: in the log (covered ≤ observed ≤ its last seq).
	db, err := r.Finish(ctx, st.covered)
	if db == nil {
		return err
	}
	st.dbMu.Lock()
	old := st.db
	st.db = db
	st.rebuilt = reason
	// The old file's flush error goes with it; a failed directory fsync
	// (the new file in place, its rename maybe not surviving a crash) is
	// the new file's, kept until a flush succeeds, and said.
	st.flushErr = err
	st.dbMu.Unlock()
	old.Close()
	if err != nil {
		st.warn("Lab store rebuilt, but its rename may not survive a crash (the next start checks the file it finds)", "error", err.Error())
	}
	return nil
}

// Rebuilt is why the file found was not trusted ("" when it was, or
// there was none).
func (st *labStore) Rebuilt() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.rebuilt
}

package labapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/home"
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
	tmp := st.path + ".rebuild"
	db, err := createLabStore(tmp)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		db.Close()
		os.Remove(tmp)
		return err
	}
	st.mu.Lock()
	upTo := st.covered
	st.mu.Unlock()
	var seq uint64
	record := func(s uint64, _ string) { seq = s }
	if err := catchUpLabStore(ctx, db, st.log, 1, upTo, st.batch, record); err != nil {
		return fail(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.flushing != nil {
		st.drained.Wait()
	}
	if st.closed {
		return fail(errLabStoreClosed)
	}
	// Flushed since upTo: in the log (covered ≤ observed ≤ its last seq).
	if err := catchUpLabStore(ctx, db, st.log, seq+1, st.covered, st.batch, record); err != nil {
		return fail(err)
	}
	st.hook(labPhaseRebuildBuilt)
	if err := os.Rename(tmp, st.path); err != nil {
		return fail(fmt.Errorf("labstore: %w", err))
	}
	st.hook(labPhaseRebuildRenamed)
	if err := home.SyncDir(filepath.Dir(st.path)); err != nil {
		// The rename may not survive a crash: the next open checks
		// whichever file it finds.
		st.flushErr = errors.Join(st.flushErr, fmt.Errorf("labstore: fsync directory after rebuild: %w", err))
	}
	st.dbMu.Lock()
	old := st.db
	st.db = db
	st.rebuilt = reason
	st.flushErr = nil
	st.dbMu.Unlock()
	old.Close()
	return nil
}

// Rebuilt is why the file found was not trusted ("" when it was, or
// there was none).
func (st *labStore) Rebuilt() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.rebuilt
}

package labapi

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/reqindex"
)

// The Lab store's check after open and its rebuild in place (labStore).

// startVerification checks the store's pages and every value's CRC in a
// goroutine (Close ends and waits for it); on failure the file is
// rebuilt from the log while the old one serves. Later calls, and calls
// for a store made new at open, do nothing.
func (st *labStore) startVerification() {
	st.live.StartVerification(func(context.Context) error {
		// The check reads every page: its resident share is dropped as
		// it goes (reqindex.WhileTrimming).
		st.dbMu.RLock()
		err := reqindex.WhileTrimming(st.db, 100*time.Millisecond, func() error { return checkLabStore(st.db) })
		st.dbMu.RUnlock()
		if err == nil {
			return nil
		}
		st.damaged(fmt.Errorf("check after open: %w", err))
		st.rebuildWG.Wait()
		return nil
	})
}

// damaged starts the rebuild of a damaged file (once at a time; none
// after Close).
func (st *labStore) damaged(why error) {
	st.live.Locked(func(closed bool) {
		if st.rebuilding || closed {
			return
		}
		st.rebuilding = true
		st.warn("Lab store damaged, rebuilding it from the log", "file", filepath.Base(st.path), "reason", why.Error())
		st.rebuildWG.Add(1)
		go func() {
			defer st.rebuildWG.Done()
			err := st.rebuildLive(why.Error())
			st.live.Locked(func(bool) { st.rebuilding = false })
			if err != nil {
				st.warn("Lab store not rebuilt; retried at the next damage found or start", "error", err.Error())
			}
		}()
	})
}

// rebuildLive rebuilds the store from the log into a new file beside the
// old one while the old one serves, then swaps it in
// (reqindex.Live.Rebuild).
func (st *labStore) rebuildLive(reason string) error {
	dirSync, err := st.live.Rebuild(reason)
	if dirSync != nil {
		st.warn("Lab store rebuilt, but its rename may not survive a crash (the next start checks the file it finds)", "error", dirSync.Error())
	}
	return err
}

// install puts a rebuilt file in place of the open one.
func (st *labStore) install(db *bolt.DB) {
	st.dbMu.Lock()
	old := st.db
	st.db = db
	st.dbMu.Unlock()
	old.Close()
}

// Rebuilt is why the file found was not trusted ("" when it was, or
// there was none).
func (st *labStore) Rebuilt() string { return st.live.State().Rebuilt }

package labapi

import "github.com/cmlab/cmlab/reqindex"

// trim is reqindex.TrimMapped of the open store. It takes only the file's
// read lock: a rebuild swaps its new file in holding the store's lock
// (reqindex.Live) and then waiting for the file's write lock.
func (st *labStore) trim() {
	st.dbMu.RLock()
	defer st.dbMu.RUnlock()
	if !st.dbClosed {
		reqindex.TrimMapped(st.db)
	}
}

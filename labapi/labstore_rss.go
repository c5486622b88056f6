package labapi

import "github.com/cmlab/cmlab/reqindex"

// trim is reqindex.TrimMapped of the open store.
func (st *labStore) trim() {
	st.dbMu.RLock()
	defer st.dbMu.RUnlock()
	if !st.live.State().Closed {
		reqindex.TrimMapped(st.db)
	}
}

package labapi

import "github.com/cmlab/cmlab/reqindex"

// trim is reqindex.TrimMapped of the open store.
func (st *labStore) trim() {
	st.dbMu.RLock()
	defer st.dbMu.RUnlock()
	st.mu.Lock()
	closed := st.closed
	st.mu.Unlock()
	if !closed {
		reqindex.TrimMapped(st.db)
	}
}

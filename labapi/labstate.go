package labapi

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
)

// The Lab read model (runs, experiments, sessions) is the Lab store
// (labstore.go), opened with the server. Before issue 26 it was a heap
// model kept in state/snapshots/labstate.msgpack; that file is removed
// when the store opens (it would only be stale).

// oldLabSnapshotFile is the heap model's snapshot of h (before issue 26).
func oldLabSnapshotFile(h home.Home) string {
	return filepath.Join(h.StateDir(), "snapshots", "labstate.msgpack")
}

// openLabState opens the Lab store of the engine's home (once per engine:
// every server on it shares the store, engine.Shared), brings it up to
// the log and subscribes it; it is closed at the engine's final
// checkpoint. The check of the file after open runs in
// a goroutine (labStore.startVerification).
func (s *Server) openLabState() error {
	eng := s.opts.Engine
	h := eng.Home()
	if !eng.ReadOnly() {
		snapshot.RemoveStale(oldLabSnapshotFile(h))
		os.Remove(oldLabSnapshotFile(h))
	}
	v, err := eng.Shared("labapi.labstore", func() (any, error) {
		st, err := openLabStore(context.Background(), labStoreOptions{path: LabStoreFile(h), log: eng.Log(), readOnly: eng.ReadOnly(), warn: s.log.Warn})
		if err != nil {
			return nil, err
		}
		if why := st.Rebuilt(); why != "" && eng.Log().LastSeq() > 0 {
			s.log.Warn("Lab store rebuilt from the log", "file", h.Rel(LabStoreFile(h)), "reason", why)
		}
		if err := eng.Subscribe(st); err != nil {
			st.Close()
			return nil, err
		}
		st.startVerification()
		eng.OnCheckpoint(func(final bool) {
			if final {
				if err := st.Close(); err != nil && !errors.Is(err, errLabStoreClosed) {
					s.log.Warn("Lab store not closed cleanly; the next start catches it up from the log", "error", err.Error())
				}
			}
		})
		return st, nil
	})
	if err != nil {
		return err
	}
	st := v.(*labStore)
	s.lab = st
	return nil
}

// labStoreError is the answer of a read the store could not make.
func labStoreError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errLabStoreCorrupt) {
		return NewError(CodeUnavailable, "The Lab store is damaged: "+err.Error(), "Retry shortly: the store is being rebuilt from the log.")
	}
	return err
}

// LabStoreCovers is the seq the Lab store of h covers, read from its file
// opened read-only (so: not while a daemon holds it; the daemon's own
// compaction asks its server, Server.LabStoreCovered). An error when the
// file is missing, locked or untrusted (the daemon's read-model table,
// package daemon).
func LabStoreCovers(h home.Home) (uint64, error) {
	db, covered, _, err := openLabStoreFile(LabStoreFile(h), true)
	if err != nil {
		return 0, err
	}
	db.Close()
	return covered, nil
}

// LabStoreCovered is the seq the open Lab store's file covers.
func (s *Server) LabStoreCovered(home.Home) (uint64, error) { return s.lab.DurableCovered(), nil }

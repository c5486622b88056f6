package retention

import (
	"errors"
	"log/slog"
	"os"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/snapshot"
)

// Open subscribes a retention/status model to eng (issue 16): its
// snapshot (state/snapshots/retention.msgpack) if it can be trusted — a
// refused one is logged and the model rebuilt from the log — then the log
// after it. Unless eng is read-only, the snapshot is written at eng's
// checkpoints once SnapshotEvery events passed, and at close. The daemon
// (package daemon) opens one per engine and hands it to the HTTP server
// and the compaction policy; `cmlab status`, `cmlab step list` without a
// daemon and the compaction holders read that file and the log after it.
func Open(eng *engine.Engine, log *slog.Logger) (*Model, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := SnapshotFile(eng.Home())
	if !eng.ReadOnly() {
		snapshot.RemoveStale(path)
	}
	l := eng.Log()
	m := New()
	if err := m.LoadSnapshot(path, l.FirstSeq(), l.LastSeq(), LogIDAt(l)); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("retention model snapshot ignored, rebuilding from the log", "file", eng.Home().Rel(path), "reason", err.Error())
		}
		m = New()
	}
	if err := eng.Subscribe(m); err != nil {
		return nil, err
	}
	if eng.ReadOnly() {
		return m, nil
	}
	eng.OnCheckpoint(func(final bool) {
		every := uint64(SnapshotEvery)
		if final {
			every = 0
		}
		if _, err := m.WriteSnapshot(path, every); err != nil {
			// Only the next reader's tail grows; retried at the next checkpoint.
			log.Warn("retention model snapshot not written", "error", err.Error())
		}
	})
	return m, nil
}

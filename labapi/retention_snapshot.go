package labapi

import (
	"errors"
	"log/slog"
	"os"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/snapshot"
)

func init() {
	// The read-models retention holder counts the Lab state's snapshot.
	compact.RegisterReadModel(compact.ReadModel{Name: labSnapModel, Covers: func(h home.Home) (uint64, error) {
		return compact.SnapshotModel{File: LabSnapshotFile(h), Model: labSnapModel, Version: labSnapVersion()}.Covers()
	}})
}

// OpenRetention subscribes the retention/status read model to eng (issue
// 16): its snapshot (state/snapshots/retention.msgpack) if it can be
// trusted — a refused one is logged and the model rebuilt from the log —
// then the log after it. Unless eng is read-only, the snapshot is written
// at eng's checkpoints once retention.SnapshotEvery events passed, and at
// close. `cmlab status`, `cmlab step list` without a daemon and the
// compaction holders read that file and the log after it.
func OpenRetention(eng *engine.Engine, log *slog.Logger) (*retention.Model, error) {
	path := retention.SnapshotFile(eng.Home())
	if !eng.ReadOnly() {
		snapshot.RemoveStale(path)
	}
	l := eng.Log()
	m := retention.New()
	if err := m.LoadSnapshot(path, l.FirstSeq(), l.LastSeq(), retention.LogIDAt(l)); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("retention model snapshot ignored, rebuilding from the log", "file", eng.Home().Rel(path), "reason", err.Error())
		}
		m = retention.New()
	}
	if err := eng.Subscribe(m); err != nil {
		return nil, err
	}
	if eng.ReadOnly() {
		return m, nil
	}
	eng.OnCheckpoint(func(final bool) {
		every := uint64(retention.SnapshotEvery)
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

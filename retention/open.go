package retention

import (
	"log/slog"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/snapshot"
)

// Open subscribes a retention/status model to eng (issue 16) through the
// read-model kit (snapshot.Attach): its snapshot
// (state/snapshots/retention.msgpack) if it can be trusted — a refused one
// is logged and the model rebuilt from the log — then the log after it.
// Unless eng is read-only, the snapshot is written at eng's checkpoints
// once SnapshotEvery events passed, and at close. The daemon (package
// daemon) opens one per engine and hands it to the HTTP server and the
// compaction policy; `cmlab status`, `cmlab step list` without a daemon
// and the compaction holders read that file and the log after it.
func Open(eng *engine.Engine, log *slog.Logger) (*Model, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := SnapshotFile(eng.Home())
	m, _, refused, err := snapshot.Attach(eng, Kind, path, New, func(m *Model) error { return eng.Subscribe(m) }, func(_ bool, err error) {
		if err != nil {
			// Only the next reader's tail grows; retried at the next checkpoint.
			log.Warn("retention model snapshot not written", "error", err.Error())
		}
	})
	if refused != "" {
		log.Warn("retention model snapshot ignored, rebuilding from the log", "file", eng.Home().Rel(path), "reason", refused)
	}
	return m, err
}

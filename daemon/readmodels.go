package daemon

import (
	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
)

// ReadModels is the table of the read models a daemon restarts from a
// snapshot (state/snapshots/, package snapshot) or a store of their own:
// the Lab store (state/labstore.db, package labapi), the step
// state, the retention model and the terminal's. The compaction's
// read-models holder (compact.Options.ReadModels) keeps the log after the
// oldest seq their snapshots cover; the daemon's policy and `cmlab
// compact` pass this table. Adding a read model is one row here.
func ReadModels() []compact.ReadModel {
	return []compact.ReadModel{
		{Name: "labstore", Covers: labapi.LabStoreCovers},
		{Name: steps.SnapshotModel, Covers: func(h home.Home) (uint64, error) { return steps.SnapshotKind.Covers(steps.SnapshotFile(h)) }},
		{Name: retention.ModelName, Covers: func(h home.Home) (uint64, error) { return retention.Kind.Covers(retention.SnapshotFile(h)) }},
		{Name: "pty", Covers: pty.SnapshotCovers},
	}
}

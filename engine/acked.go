package engine

import (
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// AckedSeq is what the home knows of its log's end, for wal.Options.Acked
// and AcceptTailLoss (and wal verify's): seq is the views' checkpoint,
// written only after the events it covers were fsynced and applied, so a
// log that ends before it lost acknowledged entries and the log refuses
// to cut them as a torn tail (0 when there is no trusted checkpoint).
// accepted is set when a salvage marked the views stale: the operator
// accepted the loss, the log is cut where it is torn and the views are
// regenerated from it.
func AckedSeq(h home.Home) (seq uint64, accepted bool) {
	if projections.ViewsStale(h) {
		return 0, true
	}
	seq, ok, err := projections.ReadCheckpointSeq(h)
	if err != nil || !ok {
		return 0, false
	}
	return seq, false
}

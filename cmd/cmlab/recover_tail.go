package main

import (
	"fmt"
	"strings"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/wal"
)

// acceptTailLoss is salvage's explicit way past a log whose end lost
// acknowledged entries (wal/acked.go: cut through what the views'
// checkpoint covers, or whole frames of another seq): Open refuses to cut
// such a tail, and wal.Salvage leaves a tail to Open. Accepting the loss
// is marking the views stale (projections.MarkViewsStale): the next open
// then cuts the tail as torn (its bytes to quarantine/, a wal.repaired
// event) and regenerates the views from the log as it is, so a home that
// served before starts again. checkShipped refuses when the home's stream
// holds the lost seqs (its fix names --from-stream). It returns the lost
// ranges as salvaged entries, none when the tail holds no acknowledged
// entry.
func acceptTailLoss(h home.Home, checkShipped bool) ([]recovery.SalvagedEntry, error) {
	acked, accepted := engine.AckedSeq(h)
	if accepted {
		return nil, nil
	}
	rep, _ := wal.VerifyWith(h.WALDir(), wal.VerifyOptions{Acked: acked})
	var lost []wal.LostRange
	var out []recovery.SalvagedEntry
	for _, b := range rep.Bad {
		if !strings.HasPrefix(b.Reason, wal.ReasonAckedCut) {
			continue
		}
		last := b.Seq + max(b.Lost, 1) - 1
		lost = append(lost, wal.LostRange{First: b.Seq, Last: last})
		out = append(out, recovery.SalvagedEntry{Seq: b.Seq,
			Where: fmt.Sprintf("the log's end, segment %s offset %d (%s; what is left there goes to quarantine/ at the next open)", b.Segment, b.Offset, b.Reason),
			Guess: fmt.Sprintf("seq %d..%d, acknowledged, are in no segment: the loss is accepted and the views are regenerated from the log", b.Seq, last)})
	}
	if len(lost) == 0 {
		return nil, nil
	}
	if checkShipped {
		if err := refuseShippedLoss(h, lost); err != nil {
			return nil, err
		}
	}
	if err := projections.MarkViewsStale(h); err != nil {
		return nil, err
	}
	return out, nil
}

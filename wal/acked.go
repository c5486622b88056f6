package wal

import "fmt"

// A torn tail is what a crash leaves of a write that was never
// acknowledged: an entry is acknowledged only after the fsync that made
// it durable. Damage at the end of the last segment is therefore taken
// for a torn tail (cut by Open) only while nothing says it holds
// acknowledged entries. Two things do:
//
//   - a whole frame there (its CRC good) that carries another seq than
//     the one due: no crash writes that; it is a segment of another log,
//     or of another place in this one (a copy, a restore gone wrong);
//   - Options.Acked (VerifyOptions.Acked): a seq the home knows was
//     acknowledged, the views' checkpoint (state/checkpoint.json), which
//     the engine writes only after the events it covers were applied,
//     after their fsync. A log that ends before it (cut through a frame,
//     at a frame boundary, or with its last segment gone) lost
//     acknowledged entries.
//
// Such damage is corruption (*CorruptError, ReasonAckedCut): Open
// refuses it and changes nothing, Verify reports it. The operator's way
// on is `cmlab recover --salvage --apply`, which accepts the loss and
// marks the views stale (projections.MarkViewsStale): the engine passes
// AcceptTailLoss then, Open cuts the tail as torn, and the views are
// regenerated from the log as it is.

// ReasonAckedCut marks damage at the end of the log that runs through
// entries known acknowledged (see the top of this file).
const ReasonAckedCut = "acknowledged entries cut"

// refuseAckedCut turns the torn tail of ds into corruption when it holds
// acknowledged entries, and records the entries missing from the log's
// end when the log ends before acked (0: unknown) with no torn tail.
// accept (a salvage accepted the loss) leaves every tail torn.
func (ds *dirScan) refuseAckedCut(acked uint64, accept bool) {
	if accept {
		return
	}
	torn := false
	for i := range ds.Bad {
		b := &ds.Bad[i]
		if !b.TornTail {
			continue
		}
		torn = true
		switch {
		case b.Reason == ReasonSeq:
			b.TornTail = false
			b.Reason = fmt.Sprintf("%s: %s (whole frames of another seq are no torn write: a segment of another log?)", ReasonAckedCut, ReasonSeq)
			if acked >= b.Seq {
				b.Lost = acked - b.Seq + 1
			}
		case acked > 0 && b.Seq <= acked:
			b.TornTail = false
			b.Reason = fmt.Sprintf("%s: %s through seq %d, which the views' checkpoint (state/checkpoint.json) says was acknowledged", ReasonAckedCut, b.Reason, acked)
			b.Lost = acked - b.Seq + 1
		}
	}
	if torn || acked == 0 || acked <= ds.Last {
		return
	}
	seg, off := segmentName(ds.Last+1), int64(0)
	if n := len(ds.Segments); n > 0 {
		t := ds.Segments[n-1]
		seg, off = t.Segment.Name, t.Size-t.Prealloc
	}
	if ds.Last == 0 && len(ds.Segments) == 0 && ds.First > 1 {
		return // a compacted log with no segment: reported by scanDir
	}
	ds.Bad = append(ds.Bad, BadEntry{Segment: seg, Offset: off, Seq: ds.Last + 1, Lost: acked - ds.Last,
		Reason: fmt.Sprintf("%s: the log ends at seq %d, but the views' checkpoint (state/checkpoint.json) says seq %d was acknowledged", ReasonAckedCut, ds.Last, acked)})
}

// VerifyOptions configure VerifyWith.
type VerifyOptions struct {
	// Acked is a seq known acknowledged (the views' checkpoint; 0:
	// unknown): damage at the log's end before it is corruption, not a
	// torn tail (see the top of acked.go).
	Acked uint64
	// AcceptTailLoss: a salvage accepted the loss of the log's end
	// (Options.AcceptTailLoss): damage there is a torn tail whatever it
	// holds, as the next Open will cut it.
	AcceptTailLoss bool
}

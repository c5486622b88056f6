package main

import (
	"fmt"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// The log's end in 'cmlab status' with no daemon: the views' checkpoint
// says which seq was acknowledged (engine.AckedSeq); a log that ends
// before it lost acknowledged entries, which the next open refuses to
// cut as a torn tail (wal/acked.go). Status says so, degraded, exit 3
// with the fix, as 'cmlab wal verify' does. A log status cannot read at
// all (a segment that is a symlink loop, unreadable) is not healthy
// either.

// statusTail compares the log's last seq with the checkpoint's.
func statusTail(h home.Home, g *globalOpts, rep *statusReport) error {
	if rep.Daemon != nil || rep.Health == nil || rep.Health.Status != "ok" {
		return nil
	}
	// engine.AckedSeq, from the checkpoint gatherStatus read.
	if projections.ViewsStale(h) || rep.cpErr != nil || !rep.cpOK || rep.cpSeq == 0 {
		return nil
	}
	acked := rep.cpSeq
	// Health is ok here only when the log read to its end (gatherStatus:
	// retention.Load), so its last seq is already known: no second read
	// of the last segment.
	last := rep.LastSeq
	if last >= acked {
		return nil
	}
	cause := fmt.Sprintf("%s: the log ends at seq %d, but the views' checkpoint says seq %d was acknowledged (%d entries missing from its end)", wal.ReasonAckedCut, last, acked, acked-last)
	fix := "put the log's last segment back from a backup if there is one; else " + corruptFix(g.home) + " (it accepts the loss and regenerates the views)"
	rep.Health.Status, rep.Health.Cause, rep.Health.Fix = "degraded", cause, fix
	return newCLIError(exitCorrupt, "CORRUPT", cause, fix)
}

// unreadableLog is status's error for a log it cannot read (not damage
// it can place: a file it may not open, a symlink loop).
func unreadableLog(err error) error {
	return newCLIError(exitCorrupt, "UNREADABLE", fmt.Sprintf("the log cannot be read: %v", err),
		"'cmlab wal verify' names the file; a segment of wal/ must be a regular file the home's owner can read (a symlink there is not the log's own: put the segment back)")
}

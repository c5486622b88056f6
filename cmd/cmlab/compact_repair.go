package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/wal"
)

// 'cmlab compact --repair-manifest [--archive DIR] [--deleted]': rebuild a
// damaged or lost wal/MANIFEST from the segments on disk (wal.RepairManifest).
// It is the fix every command names for a bad manifest; salvage refuses
// one (it would write placeholders over history the archive still holds).

// repairManifest runs the repair on h's log (the daemon must be stopped:
// it takes the log's lock).
func repairManifest(g *globalOpts, h home.Home, deleted bool) (wal.RepairReport, error) {
	if info, err := labapi.ReadDaemonInfo(h); err == nil {
		return wal.RepairReport{}, fmt.Errorf("a daemon holds the log (pid %d at %s): stop it first ('cmlab stop'), then run 'cmlab compact --repair-manifest' again", info.Pid, info.Listen)
	}
	o := wal.RepairOptions{Deleted: deleted, QuarantineDir: h.QuarantineDir()}
	if g.archive != "" {
		o.Archives = []string{g.archive}
	}
	id, err := home.ReadHomeID(h)
	switch {
	case err == nil:
		o.HomeID = id
	case !errors.Is(err, os.ErrNotExist):
		return wal.RepairReport{}, err
	}
	rep, err := wal.RepairManifest(h.WALDir(), o)
	if err != nil {
		return rep, err
	}
	if o.HomeID == "" && rep.HomeID != "" {
		// state/home-id lost with the manifest: the archive's is the home's.
		if err := home.WriteHomeID(h, rep.HomeID); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func printRepair(w io.Writer, rep wal.RepairReport) {
	fmt.Fprintf(w, "wal/MANIFEST was %s\n", rep.Was)
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "  not used: %s\n", s)
	}
	if rep.Quarantined != "" {
		fmt.Fprintf(w, "  the old bytes are kept in %s\n", rep.Quarantined)
	}
	switch {
	case !rep.Written:
		fmt.Fprintln(w, "nothing to write: the manifest and its archives' records are sound")
		return
	case rep.Was == "sound":
		fmt.Fprintln(w, "recorded the home id and the archive's segments (ARCHIVE)")
	default:
		fmt.Fprintf(w, "rebuilt: the log starts at seq %d\n", rep.FirstSeq)
	}
	for _, r := range rep.Removed {
		where := "deleted"
		if r.Archive != "" {
			where = "archived in " + r.Archive
		}
		fmt.Fprintf(w, "  seq %d..%d: %d segment(s), %d bytes, %s\n", r.First, r.Last, r.Segments, r.Bytes, where)
	}
	fmt.Fprintln(w, "check it with 'cmlab wal verify'")
}

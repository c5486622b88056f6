package main

import (
	"context"
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
func repairManifest(ctx context.Context, g *globalOpts, h home.Home, deleted bool, from salvageSource) (wal.RepairReport, error) {
	if info, err := labapi.ReadDaemonInfo(h); err == nil {
		return wal.RepairReport{}, fmt.Errorf("a daemon holds the log (pid %d at %s): stop it first ('cmlab stop'), then run 'cmlab compact --repair-manifest' again", info.Pid, info.Listen)
	}
	if from.nats != "" {
		if g.archive == "" {
			return wal.RepairReport{}, &usageError{msg: "--from-nats needs --archive DIR: the segments taken from the stream are written there"}
		}
		if err := refillArchive(ctx, h, g.archive, from); err != nil {
			return wal.RepairReport{}, err
		}
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

// refillArchiveChunk is the most entries one segment file written from
// the stream holds.
const refillArchiveChunk = 16384

// refillArchive writes into archive, as segment files, the seqs before the
// log's first segment that archive lacks and the home's stream holds
// (each checked: headers, MAC under state/ship-key, CRC, seq): the stream
// as a source of the repair. It stops at the first seq the stream lacks;
// the repair then names what is still missing.
func refillArchive(ctx context.Context, h home.Home, archive string, from salvageSource) error {
	if err := wal.CheckArchiveDir(h.WALDir(), archive); err != nil {
		return err
	}
	gaps, err := wal.ArchiveGaps(h.WALDir(), archive)
	if err != nil || len(gaps) == 0 {
		return err
	}
	fetch, closeSrc, err := salvageFetch(ctx, h, from) // recover_stream.go
	if err != nil {
		return err
	}
	defer closeSrc()
	for _, gp := range gaps {
		for first := gp.First; first <= gp.Last; {
			var entries [][]byte
			for seq := first; seq <= gp.Last && len(entries) < refillArchiveChunk; seq++ {
				e, err := fetch(seq)
				if err != nil {
					return err
				}
				if e == nil {
					break
				}
				entries = append(entries, e)
			}
			if len(entries) == 0 {
				break // the stream lacks first: the repair names it
			}
			if err := wal.WriteArchivedSegment(archive, first, entries); err != nil {
				return err
			}
			first += uint64(len(entries))
		}
	}
	return nil
}

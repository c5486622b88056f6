package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/wal"
)

// salvageLog runs wal.Salvage over the home's log (the daemon must be
// stopped: Salvage takes the lock) and lists each lost entry with where it
// was and what its neighbours say it probably was. rewritten says whether
// the log changed: its views must then be regenerated from it (engine
// Options.RebuildViews), since they still hold the lost entries' lines.
func salvageLog(h home.Home, from ...salvageSource) (lost []recovery.SalvagedEntry, rewritten bool, err error) {
	var src salvageSource
	if len(from) > 0 {
		src = from[0]
	}
	fetch, closeSrc, err := salvageFetch(context.Background(), h, src) // recover_stream.go
	if err != nil {
		return nil, false, err
	}
	defer closeSrc()
	// First, durably, before the first byte is rewritten: the views must
	// be regenerated from whatever log the salvage leaves, even if this
	// process dies before it opens the engine (the next open sees the
	// flag). Not when the salvage refuses or finds nothing to do: a
	// stale flag with a log that cannot be read back whole would keep
	// the daemon from starting.
	rep, err := wal.SalvageWith(h.WALDir(), wal.SalvageOptions{QuarantineDir: h.QuarantineDir(),
		Fetch: fetch,
		BeforeRewrite: func(lost []wal.LostRange) error {
			if fetch == nil {
				if err := refuseShippedLoss(h, lost); err != nil {
					return err
				}
			}
			return projections.MarkViewsStale(h)
		}})
	if err != nil {
		return nil, false, err
	}
	out := make([]recovery.SalvagedEntry, 0, len(rep.Lost))
	for _, l := range rep.Lost {
		where := fmt.Sprintf("segment %s offset %d (%s", l.Segment, l.Offset, l.Reason)
		if q := l.Quarantine; q != "" {
			if filepath.IsAbs(q) {
				q = h.Rel(q)
			} else {
				q = "quarantine/" + filepath.ToSlash(q)
			}
			where += ", bytes in " + q
		}
		where += ")"
		guess := l.Guess
		var nb []string
		if l.Prev != nil {
			nb = append(nb, fmt.Sprintf("after seq %d %s on %s", l.Prev.Seq, l.Prev.Type, l.Prev.Stream))
		}
		if l.Next != nil {
			nb = append(nb, fmt.Sprintf("before seq %d %s on %s", l.Next.Seq, l.Next.Type, l.Next.Stream))
		}
		if guess == "" {
			guess = strings.Join(nb, ", ")
		}
		out = append(out, recovery.SalvagedEntry{Seq: l.Seq, Where: where, Guess: guess})
	}
	cut, err := acceptTailLoss(h, fetch == nil) // recover_tail.go
	if err != nil {
		return out, len(rep.Rewritten) > 0, err
	}
	return append(out, cut...), len(rep.Rewritten) > 0 || len(cut) > 0, nil
}

// salvageJSON is what `recover --json` prints: the plan, and after a
// salvage that rewrote the log, under "views", what regenerating the
// views changed (projections.RegenerateReport).
func salvageJSON(plan *recovery.Plan, views *projections.RegenerateReport) any {
	if views == nil {
		return plan
	}
	return struct {
		*recovery.Plan
		Views *projections.RegenerateReport `json:"views"`
	}{plan, views}
}

// writeRegenerated prints what a regeneration of the views changed: each
// view with its changed lines and the offset past which clients' cursors
// are invalid, and each feedback line moved to quarantine/.
func writeRegenerated(w io.Writer, what string, rep *projections.RegenerateReport) {
	if rep == nil {
		return
	}
	if rep.Resumed {
		fmt.Fprintln(w, "views: finished a view swap an earlier crash interrupted")
	}
	if len(rep.Changes) == 0 {
		fmt.Fprintf(w, "views: regenerated from the log up to seq %d after the %s; no view line changed\n", rep.LastSeq, what)
	} else {
		fmt.Fprintf(w, "views: regenerated from the log up to seq %d after the %s; %d view file(s) changed:\n", rep.LastSeq, what, len(rep.Changes))
		for _, c := range rep.Changes {
			fmt.Fprintf(w, "  %s\n", c)
			if c.Quarantine != "" {
				fmt.Fprintf(w, "    removed lines kept in %s\n", c.Quarantine)
			}
		}
	}
	for _, a := range rep.SetAside {
		fmt.Fprintf(w, "  %s\n", a)
	}
	if rep.Foreign > 0 {
		fmt.Fprintf(w, "  %d line(s) another program appended to feedback/feedback.jsonl kept after the log's lines and ingested\n", rep.Foreign)
	}
}

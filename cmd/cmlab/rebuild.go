package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
)

type rebuildOpts struct {
	into  string
	check bool
}

// newRebuildCmd builds 'cmlab rebuild [--into DIR] [--check]'.
func newRebuildCmd(g *globalOpts) *cobra.Command {
	o := &rebuildOpts{}
	c := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild every view from the log (in place, --into DIR, or --check against the live views)",
		Long: `Rebuild every view (feedback, runs, experiments, session maps, steps,
terminal spools and blocks) from the log.

Without flags the home's own views are regenerated in place: rebuilt into
state/regen inside the home and swapped in view by view, the checkpoint
last. Lines of feedback/feedback.jsonl that the log does not produce are
moved to quarantine/ (and listed with their offsets), except complete
lines another program appended after the checkpoint whose ids the log does
not hold, which are kept and ingested; nothing the log holds is appended
to it again. This needs the log's lock, so stop the daemon first. --into DIR writes the views into DIR instead
(the log is read without its lock, so a running daemon is fine). --check
rebuilds into a temporary directory and compares byte for byte with the live
views, naming the first differing file and offset; it exits 0 only when they
are identical. Progress goes to stderr on long rebuilds. An in-place
rebuild also writes the read models' snapshots and the Lab store
(state/labstore.db), so the next daemon start does not read the whole log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.check && o.into != "" {
				return &usageError{msg: "--check and --into exclude each other"}
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			return runRebuild(cmd.Context(), g, h, o)
		},
	}
	c.Flags().StringVar(&o.into, "into", "", "write the rebuilt views into `DIR` instead of the home")
	c.Flags().BoolVar(&o.check, "check", false, "rebuild into a temporary directory and compare with the live views")
	archiveFlag(c.Flags(), g)
	return c
}

type rebuildReport struct {
	Mode       string  `json:"mode"` // in-place | into | check
	Events     int     `json:"events"`
	LastSeq    uint64  `json:"lastSeq"`
	Skipped    uint64  `json:"skipped"`
	Into       string  `json:"into,omitempty"`
	Identical  *bool   `json:"identical,omitempty"`
	DiffFile   string  `json:"diffFile,omitempty"`
	DiffOffset *int64  `json:"diffOffset,omitempty"`
	DiffLine   int     `json:"diffLine,omitempty"`
	DiffDetail string  `json:"diffDetail,omitempty"`
	Fix        string  `json:"fix,omitempty"`
	Seconds    float64 `json:"seconds"`
	// Views: what an in-place rebuild changed (lines, cursors, quarantine).
	Views *projections.RegenerateReport `json:"views,omitempty"`
}

// rebuildFix is the remedy --check names when the views differ.
const rebuildFix = "stop the daemon and run `cmlab rebuild` (it regenerates the views from the log, keeping lines other programs appended to feedback/feedback.jsonl and moving damaged ones to quarantine/); a daemon also rebuilds a damaged view when it starts"

func runRebuild(ctx context.Context, g *globalOpts, h home.Home, o *rebuildOpts) error {
	start := time.Now()
	rep := rebuildReport{}
	if !o.check && o.into == "" {
		rep.Mode = "in-place"
		e, err := engine.Open(ctx, engine.Options{Home: h, RebuildViews: true, Archive: g.archive})
		if err != nil {
			if errors.Is(err, wal.ErrLocked) {
				return fmt.Errorf("%w (a daemon holds the log: stop it, or use --check or --into DIR)", err)
			}
			return err
		}
		rep.LastSeq = e.Log().LastSeq()
		rep.Views = e.Regenerated()
		if rep.Views != nil {
			rep.Events, rep.Skipped = rep.Views.Events, rep.Views.Skipped
		}
		// The request-id index is derived state too: rebuilt from the log.
		if _, err := e.RequestIndex(ctx); err != nil {
			e.Close()
			return err
		}
		if err := e.Close(); err != nil {
			return err
		}
		// The read models too, so that the next start is fast.
		if err := leaveReadModels(ctx, h); err != nil {
			return err
		}
		rep.Seconds = time.Since(start).Seconds()
		return printRebuild(g, rep)
	}
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		return err
	}
	r.SetArchive(g.archive)
	total, err := r.LastSeq()
	if err != nil {
		return err
	}
	progress := progressPrinter(g.stderr, total)
	if o.into != "" {
		rep.Mode = "into"
		dst, err := home.Resolve(o.into)
		if err != nil {
			return err
		}
		if dst.Dir == h.Dir {
			return &usageError{msg: "--into names the home itself; run 'cmlab rebuild' without --into"}
		}
		if hasLog(dst) {
			return fmt.Errorf("refusing to rebuild into %s: it holds a log of its own", o.into)
		}
		if err := os.MkdirAll(dst.Dir, home.DirPerm); err != nil {
			return err
		}
		res, err := projections.Rebuild(ctx, r.Events(1), dst, projections.RebuildOptions{UpTo: total, Progress: progress})
		if err != nil {
			return err
		}
		rep.Events, rep.LastSeq, rep.Skipped, rep.Into = res.Events, res.LastSeq, res.Skipped, o.into
		rep.Seconds = time.Since(start).Seconds()
		return printRebuild(g, rep)
	}
	rep.Mode = "check"
	// A running daemon may commit while we read and compare: when the log
	// grew meanwhile, a difference may be that, so the check runs again
	// (a few times) before it reports one.
	var diff *projections.Difference
	for attempt := 0; ; attempt++ {
		tmp, err := os.MkdirTemp("", "cmlab-rebuild-check-")
		if err != nil {
			return err
		}
		dst := home.Home{Dir: tmp}
		res, err := projections.Rebuild(ctx, r.Events(1), dst, projections.RebuildOptions{UpTo: total, NoSync: true, Progress: progress})
		if err == nil {
			rep.Events, rep.LastSeq, rep.Skipped = res.Events, res.LastSeq, res.Skipped
			diff, err = projections.Compare(h, dst)
		}
		os.RemoveAll(tmp)
		if err != nil {
			return err
		}
		if diff == nil || attempt == 2 {
			break
		}
		now, err := r.LastSeq()
		if err != nil || now == total {
			break
		}
		total = now
	}
	identical := diff == nil
	rep.Identical = &identical
	if diff != nil {
		rep.DiffFile, rep.DiffOffset, rep.DiffLine, rep.DiffDetail, rep.Fix = diff.File, &diff.Offset, diff.Line, diff.Detail, rebuildFix
	}
	rep.Seconds = time.Since(start).Seconds()
	if err := printRebuild(g, rep); err != nil {
		return err
	}
	if diff != nil {
		return withCode(exitError, fmt.Errorf("views differ from a rebuild: %s\n  fix: %s", diff, rebuildFix))
	}
	return nil
}

func hasLog(h home.Home) bool {
	ents, err := os.ReadDir(h.WALDir())
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !e.IsDir() && len(e.Name()) == 20 {
			return true
		}
	}
	return false
}

// progressPrinter reports on w at most once a second, and only for logs
// long enough for a rebuild to take a while.
func progressPrinter(w io.Writer, total uint64) func(uint64, int) {
	if total < 200_000 {
		return nil
	}
	last := time.Now()
	return func(seq uint64, done int) {
		if time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "rebuild: %d/%d events (%.0f%%)\n", seq, total, 100*float64(seq)/float64(total))
	}
}

func printRebuild(g *globalOpts, rep rebuildReport) error {
	if g.json {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	switch rep.Mode {
	case "in-place":
		fmt.Fprintf(g.stdout, "rebuilt the views of the home up to seq %d in %.2fs\n", rep.LastSeq, rep.Seconds)
		writeRegenerated(g.stdout, "rebuild", rep.Views)
	case "into":
		fmt.Fprintf(g.stdout, "rebuilt %d events (up to seq %d) into %s in %.2fs\n", rep.Events, rep.LastSeq, filepath.Clean(rep.Into), rep.Seconds)
	case "check":
		if rep.Identical != nil && *rep.Identical {
			fmt.Fprintf(g.stdout, "identical: views match a rebuild of %d events (up to seq %d)\n", rep.Events, rep.LastSeq)
		} else {
			fmt.Fprintf(g.stdout, "DIFFERENT: %s at line %d, offset %d (%s)\n  fix: %s\n", rep.DiffFile, rep.DiffLine, *rep.DiffOffset, rep.DiffDetail, rep.Fix)
		}
	}
	if rep.Skipped > 0 {
		fmt.Fprintf(g.stdout, "note: %d events could not be projected and were skipped\n", rep.Skipped)
	}
	return nil
}

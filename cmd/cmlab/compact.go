package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// archiveFlag registers --archive DIR on a command that reads the log:
// where the archived segments of a compacted log are when they are no
// longer where wal/MANIFEST says.
func archiveFlag(f *pflag.FlagSet, g *globalOpts) {
	f.StringVar(&g.archive, "archive", "", "read a compacted log's archived segments from `DIR` (default: where wal/MANIFEST says)")
}

type compactOpts struct {
	keepDays     int
	keepBytes    int64
	dryRun       bool
	resumeWindow time.Duration
	// repairManifest rebuilds wal/MANIFEST instead (compact_repair.go);
	// deleted lets it record a front no archive holds as deleted.
	repairManifest bool
	deleted        bool
	from           salvageSource // --from-nats: the stream as a source of the repair
}

// newCompactCmd builds 'cmlab compact'.
func newCompactCmd(g *globalOpts) *cobra.Command {
	o := &compactOpts{}
	c := &cobra.Command{
		Use:   "compact",
		Short: "Archive or delete log segments no longer needed (retention)",
		Long: `Remove whole segments from the front of the log: those whose every event lies
before the oldest seq still needed and outside the keep policy. The oldest
seq still needed is the minimum over the retention holders: the views'
checkpoint, open steps, open terminal blocks, the 2-hour auto-resume window
and the read models (request-id dedupe, Lab state, steps, terminal sessions
and the retention model start from their snapshots in state/snapshots/ and
the request-id index, and hold only the log after what those cover; one
without a trusted snapshot holds the whole log; archived segments stay
readable). The command prints every holder's answer.

--archive DIR moves the segments there (fsynced) instead of deleting them;
every reader (the daemon's start, rebuild, replay, trace, wal dump) reads
them back through wal/MANIFEST, which names the first retained seq and where
each removed range went. Without --archive, segments are deleted once every
holder has passed them; when a read model still holds them the output says
so.

Every archived copy is read back and checked (size, every frame's CRC)
before its segment is removed; the archive directory may not be wal/, inside
it, or the home, under any name (symlinks and bind mounts included). The
archive records whose it is (ARCHIVE, with the home id) and is refused for
another home.

--repair-manifest rebuilds a damaged or lost wal/MANIFEST from what is on
disk: the first segment in wal/ is the first retained seq, and every seq
before it must be found, segment by segment from seq 1, in --archive DIR or
in an archive the old manifest still names (each segment checked frame by
frame). With --from-nats URL the seqs DIR lacks are taken from the home's
JetStream stream (each checked with state/ship-key) and written to DIR as
segment files first. Nothing is written when a range is found nowhere
(--deleted records it as deleted by a compaction without --archive). The old manifest is kept
in quarantine/. It is the fix every command names for a bad manifest.

A crash at any point leaves the log whole: the next open finishes or drops
the compaction. ENOSPC removes nothing. With a daemon running, only
--dry-run works here; let the daemon compact (cmlab serve --compact-keep-days
N --compact-archive DIR) or stop it first.`,
		Example: `  cmlab compact --dry-run
  cmlab compact --keep-days 30 --archive /mnt/cold/cmlab-wal
  cmlab compact --keep-bytes 1073741824 --archive ./wal-archive --json
  cmlab compact --repair-manifest --archive /mnt/cold/cmlab-wal`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.keepDays < 0 || o.keepBytes < 0 {
				return &usageError{msg: "--keep-days and --keep-bytes must not be negative"}
			}
			if o.keepDays > 0 && o.keepBytes > 0 {
				return &usageError{msg: "--keep-days and --keep-bytes are exclusive"}
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			if o.repairManifest {
				if err := requireHome(g, h); err != nil {
					return err
				}
				rep, err := repairManifest(cmd.Context(), g, h, o.deleted, o.from)
				if err != nil {
					return err
				}
				return printResult(g, rep, printRepair)
			}
			if o.deleted || o.from.nats != "" {
				return &usageError{msg: "--deleted and --from-nats go with --repair-manifest"}
			}
			if o.resumeWindow <= 0 {
				return &usageError{msg: "--resume-window must be positive"}
			}
			opts := compact.Options{Home: h, ReadModels: daemon.ReadModels(), KeepDays: o.keepDays, KeepBytes: o.keepBytes, Archive: g.archive, DryRun: o.dryRun, ResumeWindow: o.resumeWindow}
			rep, err := runCompact(cmd.Context(), h, opts)
			if err != nil {
				return err
			}
			return printResult(g, rep, printCompact)
		},
	}
	c.Flags().IntVar(&o.keepDays, "keep-days", 0, "keep segments holding events of the last N days")
	c.Flags().Int64Var(&o.keepBytes, "keep-bytes", 0, "remove the oldest segments while the log holds more than N bytes")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "say what would be removed; remove nothing")
	c.Flags().DurationVar(&o.resumeWindow, "resume-window", compact.DefaultResumeWindow, "keep the events of this auto-resume window (the daemon's: cmlab serve --resume-window)")
	c.Flags().StringVar(&g.archive, "archive", "", "move removed segments to `DIR` (fsynced) instead of deleting them; with --repair-manifest: where they are")
	c.Flags().BoolVar(&o.repairManifest, "repair-manifest", false, "rebuild a damaged or lost wal/MANIFEST from the segments in wal/ and the archive (--archive DIR)")
	c.Flags().BoolVar(&o.deleted, "deleted", false, "with --repair-manifest: record the sequences no archive holds as deleted by compaction")
	c.Flags().StringVar(&o.from.nats, "from-nats", "", "with --repair-manifest --archive DIR: take the seqs DIR lacks from the home's JetStream stream at `URL` (checked with state/ship-key) and write them there")
	c.Flags().StringVar(&o.from.creds, "creds", "", "with --from-nats: NATS credentials file")
	return c
}

// runCompact compacts the home's log in this process (it takes the log's
// lock); a dry run only reads the log, so it works beside a daemon.
func runCompact(ctx context.Context, h home.Home, o compact.Options) (compact.Report, error) {
	if o.DryRun {
		src, err := compact.ReaderSource(h.WALDir())
		if err != nil {
			return compact.Report{}, err
		}
		return compact.Plan(ctx, src, o)
	}
	if info, err := labapi.ReadDaemonInfo(h); err == nil {
		return compact.Report{}, fmt.Errorf("a daemon holds the log (pid %d at %s): stop it first, run with --dry-run, or let the daemon compact (cmlab serve --compact-keep-days N --compact-archive DIR)", info.Pid, info.Listen)
	}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		if errors.Is(err, wal.ErrLocked) {
			return compact.Report{}, fmt.Errorf("%w (a daemon holds the log: stop it first, or run with --dry-run)", err)
		}
		return compact.Report{}, err
	}
	o.IndexCovered = func(ctx context.Context) (uint64, error) {
		x, err := eng.RequestIndex(ctx)
		if err != nil {
			return 0, err
		}
		return x.Covered(), nil
	}
	rep, err := compact.Run(ctx, eng.Log(), o)
	if cerr := eng.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return rep, err
}

func printCompact(w io.Writer, rep compact.Report) {
	fmt.Fprintf(w, "log: seq %d..%d, %d bytes\n", rep.FirstSeq, rep.LastSeq, rep.LogBytes)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOLDER\tNEEDS FROM SEQ\t")
	for _, h := range rep.Holders {
		seq := fmt.Sprint(h.Seq)
		if h.Seq == 0 {
			seq = "-"
		}
		note := ""
		if h.Name == "read models" {
			note = "(dedupe, Lab state, steps, terminal sessions: the log after their snapshots)"
		}
		if h.Waived {
			note += " waived: archived segments stay readable"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", h.Name, seq, note)
	}
	tw.Flush()
	fmt.Fprintf(w, "oldest seq still needed: %d", rep.Needed)
	if rep.HeldBy != "" {
		fmt.Fprintf(w, " (%s)", rep.HeldBy)
	}
	fmt.Fprintf(w, "\npolicy: %s → keeps from seq %d\n", rep.Policy, rep.PolicySeq)
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	switch {
	case len(rep.Segments) == 0:
		fmt.Fprintf(w, "nothing to remove: no segment lies wholly before seq %d", rep.Before)
		if rep.Archive == "" && strings.HasPrefix(rep.HeldBy, "read models") {
			fmt.Fprint(w, "; the read models' snapshots do not cover it yet (they are written at checkpoints every 10,000 events and at 'cmlab stop'): compact with --archive DIR, which keeps it readable")
		}
		fmt.Fprintln(w)
	case rep.Archive != "":
		fmt.Fprintf(w, "%s %d segment(s), %d bytes, to %s: the log starts at seq %d\n", verb, len(rep.Segments), rep.Bytes, rep.Archive, rep.NewFirstSeq)
	default:
		fmt.Fprintf(w, "%s %d segment(s), %d bytes (deleted): the log starts at seq %d\n", verb, len(rep.Segments), rep.Bytes, rep.NewFirstSeq)
	}
}

// compactionStatus is the compaction part of 'cmlab status'.
type compactionStatus struct {
	LogBytes int64 `json:"logBytes"`
	// ReclaimableBytes is what 'cmlab compact --archive DIR' would move now
	// (deletion reclaims only what the read models' snapshots cover); -1 when unknown.
	ReclaimableBytes int64  `json:"reclaimableBytes"`
	FirstRetainedSeq uint64 `json:"firstRetainedSeq"`
	// LastCompaction is the time of the last compaction (RFC 3339), "" if never.
	LastCompaction string             `json:"lastCompaction,omitempty"`
	Removed        []wal.RemovedRange `json:"removed,omitempty"`
	Error          string             `json:"error,omitempty"`
}

// readCompactionStatus reads the log's compaction state without its lock;
// segs are its segments (wal.Segments); the reclaimable bytes are planned
// from m, the retention model covering the log up to loaded.Last, so
// nothing is read from the log's start.
func readCompactionStatus(ctx context.Context, h home.Home, segs []wal.SegmentInfo, m *retention.Model, loaded retention.Loaded, cp *compact.KnownCheckpoint) *compactionStatus {
	st := &compactionStatus{ReclaimableBytes: -1, FirstRetainedSeq: 1}
	man, err := wal.ReadManifest(h.WALDir())
	if err != nil {
		st.Error = err.Error()
		return st
	}
	if man != nil {
		st.FirstRetainedSeq = man.FirstSeq
		st.LastCompaction = time.UnixMilli(man.CompactedAt).UTC().Format(time.RFC3339)
		st.Removed = man.Removed
	}
	for _, s := range segs {
		st.LogBytes += s.Size
	}
	r, err := wal.OpenReader(h.WALDir())
	if err == nil {
		src := compact.ReaderSourceAt(r, h.WALDir(), loaded.First, loaded.Last)
		var rep compact.Report
		// Any archive makes the plan the one --archive would carry out.
		if rep, err = compact.Plan(ctx, src, compact.Options{Home: h, ReadModels: daemon.ReadModels(), Archive: "(status)", DryRun: true, Model: m, SkipWaived: true, Segments: segs, Checkpoint: cp}); err == nil {
			st.ReclaimableBytes = rep.Bytes
		}
	}
	if err != nil {
		st.Error = err.Error()
	}
	return st
}

// printCompactionStatus prints the status lines of st.
func printCompactionStatus(w io.Writer, st *compactionStatus) {
	reclaim := "unknown"
	if st.ReclaimableBytes >= 0 {
		reclaim = fmt.Sprintf("%d bytes reclaimable (cmlab compact --archive DIR)", st.ReclaimableBytes)
	}
	last := "never"
	if st.LastCompaction != "" {
		last = st.LastCompaction
	}
	fmt.Fprintf(w, "retention:   %d bytes retained from seq %d, %s; last compaction %s\n", st.LogBytes, st.FirstRetainedSeq, reclaim, last)
	if st.Error != "" {
		fmt.Fprintf(w, "             (%s)\n", st.Error)
	}
}

// compactPolicyOpts are the flags of the daemon's compaction policy
// (cmlab serve --compact-…).
type compactPolicyOpts struct {
	keepDays    int
	keepBytes   int64
	archive     string
	every       time.Duration
	segmentSize int
}

func (o *compactPolicyOpts) flags(f *pflag.FlagSet) {
	f.IntVar(&o.keepDays, "compact-keep-days", 0, "compact the log every --compact-every, keeping N days (see cmlab compact)")
	f.Int64Var(&o.keepBytes, "compact-keep-bytes", 0, "compact the log every --compact-every, keeping at most N bytes")
	f.StringVar(&o.archive, "compact-archive", "", "compact the log every --compact-every, moving removed segments to `DIR`")
	f.DurationVar(&o.every, "compact-every", time.Hour, "how often the compaction policy runs")
	f.IntVar(&o.segmentSize, "segment-size", 0, "size of new log segments in bytes (default 4 MiB; the unit compaction removes)")
}

// policy is the compaction policy the flags ask for, nil for none.
func (o *compactPolicyOpts) policy() (*compact.Options, error) {
	if o.keepDays < 0 || o.keepBytes < 0 || (o.keepDays > 0 && o.keepBytes > 0) {
		return nil, &usageError{msg: "--compact-keep-days and --compact-keep-bytes are exclusive and not negative"}
	}
	if o.every <= 0 {
		return nil, &usageError{msg: "--compact-every must be positive"}
	}
	if o.segmentSize < 0 {
		return nil, &usageError{msg: "--segment-size must not be negative"}
	}
	if o.keepDays == 0 && o.keepBytes == 0 && o.archive == "" {
		return nil, nil
	}
	return &compact.Options{KeepDays: o.keepDays, KeepBytes: o.keepBytes, Archive: o.archive}, nil
}

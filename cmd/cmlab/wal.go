package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cmlab/cmlab/engine"
	"io"
	"os"
	"os/signal"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
)

// newWalCmd builds 'cmlab wal verify|dump|stat'. All three read the log
// without its lock, so they work while a daemon holds it.
func newWalCmd(g *globalOpts) *cobra.Command {
	return commandGroup(&cobra.Command{
		Use:   "wal",
		Short: "Inspect the write-ahead log (read-only; works while the daemon runs)",
	}, newWalVerifyCmd(g), newWalDumpCmd(g), newWalStatCmd(g))
}

func walDir(g *globalOpts) (string, error) {
	h, err := g.Home()
	if err != nil {
		return "", err
	}
	dir := h.WALDir()
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("no log in %s: %w\n  fix: check that --home (or $CMLAB_HOME) names the home; if its wal/ was removed, put it back from a backup, or `cmlab restore` the home from the JetStream stream it ships to", h.Dir, err)
	}
	return dir, nil
}

func newWalVerifyCmd(g *globalOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   "verify",
		Short: "Check every entry of every segment; exit 3 and say where on corruption",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := walDir(g)
			if err != nil {
				return err
			}
			// Damage at the log's end through what the views' checkpoint
			// says was acknowledged is corruption, as Open refuses it.
			var vo wal.VerifyOptions
			if h, err := g.Home(); err == nil {
				vo.Acked, vo.AcceptTailLoss = engine.AckedSeq(h)
			}
			rep, verr := wal.VerifyWith(dir, vo)
			if verr != nil && !errors.Is(verr, wal.ErrCorrupt) {
				return verr
			}
			// Archived ranges are checked frame by frame too (wal_archive.go).
			arep, aerr := wal.VerifyArchives(dir, g.archive, true)
			if g.json {
				if err := writeJSONValue(g.stdout, verifyWithArchives{rep, &arep}); err != nil {
					return err
				}
			} else {
				printVerify(g.stdout, rep, &arep)
			}
			if !rep.OK() {
				err := fmt.Errorf("%w: %d damaged stretch(es), first at %s", wal.ErrCorrupt, len(rep.Bad), rep.Bad[0])
				if errors.Is(verr, wal.ErrBadManifest) {
					err = fmt.Errorf("%w (%w)", err, wal.ErrBadManifest) // its fix: compact --repair-manifest
				}
				return withCode(exitCorrupt, err)
			}
			if aerr != nil {
				return aerr
			}
			if !arep.OK() {
				return archiveError(g.home, arep)
			}
			return nil
		},
	}
	archiveFlag(c.Flags(), g)
	return c
}

func printVerify(w io.Writer, rep wal.Report, arep *wal.ArchiveReport) {
	fmt.Fprintf(w, "segments %d, entries %d, seq %d..%d\n", rep.Segments, rep.Entries, rep.First, rep.Last)
	printManifest(w, rep.Manifest, rep.Pending)
	printArchives(w, arep)
	for _, b := range rep.Bad {
		fmt.Fprintf(w, "CORRUPT %s\n", b)
	}
	if rep.TornTail != nil {
		fmt.Fprintf(w, "torn tail (repaired at the next open, or a write in progress): %s\n", *rep.TornTail)
	}
	if rep.OK() && (arep == nil || arep.OK()) {
		fmt.Fprintln(w, "ok")
	}
}

type walDumpOpts struct {
	from, to uint64
	types    []string
	stream   string
	follow   bool
	poll     time.Duration
	archive  string // where a compacted log's archived segments are ("" : as wal/MANIFEST says)
	// unknownTypes: the usage error of a --type no known event type
	// matches, returned when the dump printed nothing either.
	unknownTypes error
}

// dumpLine is an event as wal dump prints it (events.Dumped, one of the
// event's JSON views).
type dumpLine = events.Dumped

func newWalDumpCmd(g *globalOpts) *cobra.Command {
	o := &walDumpOpts{}
	c := &cobra.Command{
		Use:   "dump",
		Short: "Print events as JSON lines with decoded payloads",
		Long: `Print the log's events as JSON lines: seq, v, id, type, ts, stream, req,
rh, resp and the decoded payload as data. --type takes exact types or
patterns ("feedback.*") and may be repeated. --follow keeps printing new
events as they are appended, until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Flags first: a usage error is one whatever the home holds.
			for _, t := range o.types {
				if _, err := path.Match(t, ""); err != nil {
					return &usageError{msg: fmt.Sprintf("bad --type pattern %q", t)}
				}
			}
			// A --type this code does not know may still be in the log (a
			// newer cmlab's event): it is refused after the dump if it
			// matched nothing there either (dumpWAL).
			o.unknownTypes = checkEventTypes(o.types, walTypeMatch, `a pattern like "feedback.*"`) // event_types.go
			if o.to != 0 && o.to < o.from {
				return &usageError{msg: "--to is before --from"}
			}
			if o.poll <= 0 {
				return &usageError{msg: fmt.Sprintf("--poll must be positive, not %s", o.poll)}
			}
			dir, err := walDir(g)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			o.archive = g.archive
			return dumpWAL(ctx, dir, o, g.stdout)
		},
	}
	c.Flags().Uint64Var(&o.from, "from", 1, "first seq")
	c.Flags().Uint64Var(&o.to, "to", 0, "last seq (0: to the end)")
	c.Flags().StringSliceVar(&o.types, "type", nil, "only these event types (patterns allowed; repeatable)")
	c.Flags().StringVar(&o.stream, "stream", "", "only this stream")
	c.Flags().BoolVar(&o.follow, "follow", false, "keep printing new events")
	c.Flags().DurationVar(&o.poll, "poll", 100*time.Millisecond, "poll interval of --follow")
	archiveFlag(c.Flags(), g)
	return c
}

func dumpWAL(ctx context.Context, dir string, o *walDumpOpts, w io.Writer) (retErr error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := wal.OpenReader(dir)
	if err != nil {
		return err
	}
	r.SetArchive(o.archive)
	seq := r.Events(o.from)
	if o.follow {
		seq = r.Follow(ctx, o.from, o.poll)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	printed := 0
	defer func() {
		if o.unknownTypes != nil && printed == 0 && !o.follow && retErr == nil {
			retErr = o.unknownTypes
		}
	}()
	for ev, err := range seq {
		if err != nil {
			if errors.Is(err, wal.ErrCorrupt) {
				return withCode(exitCorrupt, err)
			}
			return err
		}
		if o.to != 0 && ev.Seq > o.to {
			break
		}
		if dumpMatch(ev, o) {
			if err := enc.Encode(dumpEvent(ev)); err != nil {
				return err
			}
			printed++
		}
		// Stop at --to itself, not at the event after it: with --follow
		// that one may never come, and past it may lie damage the range
		// asked for does not reach.
		if o.to != 0 && ev.Seq >= o.to {
			break
		}
	}
	return nil
}

func dumpMatch(ev *events.Event, o *walDumpOpts) bool {
	if o.stream != "" && ev.Stream != o.stream {
		return false
	}
	if len(o.types) == 0 {
		return true
	}
	for _, t := range o.types {
		if ok, _ := path.Match(t, ev.Type); ok {
			return true
		}
	}
	return false
}

func dumpEvent(ev *events.Event) dumpLine { return events.Dump(ev) }

func newWalStatCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "stat",
		Short: "Show segments, sizes, first/last seq and event counts by type",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := walDir(g)
			if err != nil {
				return err
			}
			st, err := wal.Stat(dir)
			if err != nil {
				return err
			}
			return printResult(g, st, printStat)
		},
	}
}

func printStat(w io.Writer, st wal.StatReport) {
	fmt.Fprintf(w, "log %s: %d segments, %d bytes, %d events, seq %d..%d", st.Dir, len(st.Segments), st.Bytes, st.Events, st.First, st.Last)
	if st.Damaged > 0 {
		fmt.Fprintf(w, ", %d damaged stretch(es): run 'cmlab wal verify'", st.Damaged)
	}
	if st.TornTail {
		fmt.Fprint(w, ", bad bytes at the tail (a write in progress, or a torn tail the next open repairs)")
	}
	fmt.Fprintln(w)
	printManifest(w, st.Manifest, st.Pending)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEGMENT\tBYTES\tFIRST\tLAST\tENTRIES")
	for _, s := range st.Segments {
		bytes := strconv.FormatInt(s.Size, 10)
		if s.Preallocated > 0 {
			bytes = fmt.Sprintf("%d (+%d preallocated)", s.Size-s.Preallocated, s.Preallocated)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", s.Name, bytes, s.First, s.Last, s.Entries)
	}
	tw.Flush()
	types := make([]string, 0, len(st.ByType))
	for t := range st.ByType {
		types = append(types, t)
	}
	sort.Strings(types)
	fmt.Fprintln(tw, "\nTYPE\tEVENTS")
	for _, t := range types {
		fmt.Fprintf(tw, "%s\t%d\n", t, st.ByType[t])
	}
	tw.Flush()
}

// printManifest says where a compacted log starts and where its removed
// ranges went (nothing for a log never compacted).
func printManifest(w io.Writer, m *wal.Manifest, pending []string) {
	if m == nil {
		return
	}
	fmt.Fprintf(w, "compacted: the log starts at seq %d (wal/MANIFEST, last compaction %s)\n", m.FirstSeq, time.UnixMilli(m.CompactedAt).UTC().Format(time.RFC3339))
	for _, r := range m.Removed {
		where := "deleted"
		if r.Archive != "" {
			where = "archived to " + r.Archive
		}
		fmt.Fprintf(w, "  seq %d..%d: %d segment(s), %d bytes, %s\n", r.First, r.Last, r.Segments, r.Bytes, where)
	}
	if len(pending) > 0 {
		fmt.Fprintf(w, "  %d segment file(s) before seq %d await removal (the next open finishes the compaction): %s\n", len(pending), m.FirstSeq, strings.Join(pending, ", "))
	}
}

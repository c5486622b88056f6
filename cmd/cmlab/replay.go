package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/replay"
	"github.com/cmlab/cmlab/ship"
	"github.com/spf13/cobra"
)

type replayOpts struct {
	to     uint64
	until  string
	into   string
	check  bool
	from   uint64
	decode bool
	nats   restoreOpts // --from-nats URL --home-id ID [--stream] [--creds]
}

// newReplayCmd builds 'cmlab replay' and its subcommands.
func newReplayCmd(g *globalOpts) *cobra.Command {
	o := &replayOpts{}
	c := &cobra.Command{
		Use:   "replay",
		Short: "Time travel and drift checks over the log (the log is only read)",
		Long: `Replay the home's log. It is read without its lock, so replay works while a
daemon serves the home, and it is never modified.

  --to SEQ | --until TIME --into DIR
      Build DIR as a home whose views are exactly what they were right after
      event SEQ (or the last event at or before TIME), with the log up to
      there copied into DIR/wal. 'cmlab serve --home DIR --read-only' then
      serves the Lab as of that moment and refuses every write.
  --check [--from SEQ]
      Re-project the whole log into a shadow home and compare it with the live
      views byte for byte. Prints the first diverging sequence, view file and
      byte offset and the event that produced it; exit 0 only when identical.
      --from SEQ ignores bytes written by events before SEQ.
  --decode
      Run the current code's upcasters over every stored event and list the
      events that no longer decode (exit 1 if any).

TIME is RFC 3339 ("2026-02-06T12:00:00Z", fractional seconds allowed) or
unix milliseconds.`,
		Example: `  cmlab replay --to 120 --into /tmp/at120 && cmlab serve --home /tmp/at120 --read-only
  cmlab replay --until 2026-02-06T12:30:00Z --into /tmp/lunch
  cmlab replay --check
  cmlab replay --check --decode --json
  cmlab replay print --type feedback.submitted --start 2026-02-06T00:00:00Z
  cmlab replay steps demo-mandate --what-if`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			switch {
			case o.check || o.decode:
				if o.into != "" || o.to != 0 || o.until != "" {
					return &usageError{"--check/--decode take no --to, --until or --into"}
				}
				return runReplayCheck(cmd, g, h, o)
			case o.into != "":
				return runReplayTo(cmd, g, h, o)
			case o.to != 0 || o.until != "":
				return &usageError{"--to/--until need --into DIR"}
			}
			return &usageError{"replay needs what to do: --to SEQ (or --until TIME) --into DIR, --check, --decode, or one of print, steps, pty"}
		},
	}
	f := c.Flags()
	f.Uint64Var(&o.to, "to", 0, "replay up to and including this sequence")
	f.StringVar(&o.until, "until", "", "replay up to the last event at or before this time")
	f.StringVar(&o.into, "into", "", "directory of the replayed home (must not exist or be empty)")
	f.BoolVar(&o.check, "check", false, "re-project into a shadow home and compare with the live views")
	f.Uint64Var(&o.from, "from", 0, "with --check: ignore bytes produced by events before this sequence")
	f.BoolVar(&o.decode, "decode", false, "list stored events the current code can no longer decode")
	archiveFlag(c.PersistentFlags(), g)
	f.StringVar(&o.nats.nats, "from-nats", "", "with --to and --into: replay the history shipped to NATS JetStream at URL")
	f.StringVar(&o.nats.homeID, "home-id", "", "with --from-nats: the shipped home's id")
	f.StringVar(&o.nats.stream, "stream", "", "with --from-nats: stream name (default CMLAB_<home-id>)")
	f.StringVar(&o.nats.creds, "creds", "", "with --from-nats: NATS credentials file")
	o.nats.keys.flags(f, "with --from-nats: ")
	c.AddCommand(newReplayPrintCmd(g), newReplayStepsCmd(g))
	if pc := newReplayPtyCmd(g); pc != nil {
		c.AddCommand(pc)
	}
	return c
}

func runReplayTo(cmd *cobra.Command, g *globalOpts, h home.Home, o *replayOpts) error {
	if o.to == 0 && o.until == "" {
		return &usageError{"--into needs --to SEQ or --until TIME"}
	}
	if o.to != 0 && o.until != "" {
		return &usageError{"--to and --until are exclusive"}
	}
	var until time.Time
	if o.until != "" {
		var err error
		if until, err = parseReplayTime(o.until); err != nil {
			return &usageError{"--until: " + err.Error()}
		}
	}
	into, err := home.Resolve(o.into)
	if err != nil {
		return err
	}
	if o.nats.nats != "" {
		return runReplayFromNATS(cmd, g, into, o)
	}
	if into.Dir == h.Dir {
		return &usageError{"--into must be another directory than the home"}
	}
	tick := replayTicker()
	res, err := replay.To(cmd.Context(), replay.ToOptions{Src: h, Archive: g.archive, Into: into, UpTo: o.to, Until: until, Progress: func(seq uint64) {
		if tick() {
			fmt.Fprintf(g.stderr, "cmlab replay: replayed up to seq %d\n", seq)
		}
	}})
	if err != nil {
		return err
	}
	if err := markReplayed(into, h, res.Last); err != nil { // replayed_home.go
		return err
	}
	// The read models too, as rebuild and restore leave them, so that
	// serving the replayed home does not read its whole log again. The
	// one-shot open that builds them appends nothing.
	if err := leaveReadModels(cmd.Context(), into); err != nil {
		return err
	}
	if g.json {
		return writeJSONValue(g.stdout, map[string]any{"into": into.Dir, "first": res.First, "last": res.Last,
			"lastTime": replayISO(res.LastTS), "events": res.Events})
	}
	fmt.Fprintf(g.stdout, "replayed %d events (seq %d–%d, last at %s) into %s\n", res.Events, res.First, res.Last, replayISO(res.LastTS), into.Dir)
	fmt.Fprintf(g.stdout, "serve it (read-only unless --writable): cmlab serve --home %s\n", home.ShellQuote(into.Dir))
	return nil
}

// runReplayFromNATS is 'replay --from-nats URL --home-id ID --to SEQ
// --into DIR': time travel over a home's shipped history.
func runReplayFromNATS(cmd *cobra.Command, g *globalOpts, into home.Home, o *replayOpts) error {
	if o.nats.homeID == "" || o.to == 0 || o.until != "" {
		return &usageError{"--from-nats needs --home-id ID and --to SEQ (not --until)"}
	}
	var local *home.Home
	if h, err := g.Home(); err == nil {
		local = &h
	}
	key, err := o.nats.keys.key(o.nats.homeID, local)
	if err != nil {
		return err
	}
	res, err := ship.Restore(cmd.Context(), ship.RestoreOptions{Conn: ship.Conn{URL: o.nats.nats, Creds: o.nats.creds},
		Stream: o.nats.stream, HomeID: o.nats.homeID, Into: into, UpTo: o.to, Progress: restoreTicker(g),
		Key: key, Unauthenticated: o.nats.keys.unauthenticated})
	if err != nil {
		return shipExit(err)
	}
	if err := leaveReadModels(cmd.Context(), into); err != nil { // as restore does
		return err
	}
	if g.json {
		return writeJSONValue(g.stdout, map[string]any{"into": into.Dir, "homeId": o.nats.homeID, "first": res.First, "last": res.Last,
			"lastTime": replayISO(res.LastTS), "events": res.Events})
	}
	fmt.Fprintf(g.stdout, "replayed %d shipped events of home %s (seq %d–%d, last at %s) into %s\n", res.Events, o.nats.homeID, res.First, res.Last, replayISO(res.LastTS), into.Dir)
	fmt.Fprintf(g.stdout, "serve it read-only: cmlab serve --home %s --read-only\n", home.ShellQuote(into.Dir))
	return nil
}

func runReplayCheck(cmd *cobra.Command, g *globalOpts, h home.Home, o *replayOpts) error {
	ctx := cmd.Context()
	out := map[string]any{}
	var failures []string
	if o.check {
		tick := replayTicker()
		rep, err := replay.Check(ctx, replay.CheckOptions{Home: h, Archive: g.archive, From: o.from, Progress: func(pass int, seq, last uint64) {
			switch {
			case !tick():
			case pass == 2:
				fmt.Fprintf(g.stderr, "cmlab replay: locating the divergence: seq %d of %d\n", seq, last)
			default:
				fmt.Fprintf(g.stderr, "cmlab replay: re-projected seq %d of %d\n", seq, last)
			}
		}})
		if err != nil {
			return err
		}
		out["check"] = rep
		if !rep.Identical {
			d := rep.First
			if d.Seq == 0 {
				failures = append(failures, fmt.Sprintf("views diverge: %s holds bytes at offset %d that no event produced", d.File, d.Offset))
			} else {
				failures = append(failures, fmt.Sprintf("views diverge at seq %d: %s offset %d", d.Seq, d.File, d.Offset))
			}
		}
		if !g.json {
			writeCheckReport(g.stdout, rep)
		}
	}
	if o.decode {
		log, err := replay.OpenLogArchive(h.WALDir(), g.archive)
		if err != nil {
			return err
		}
		rep, err := replay.Decode(ctx, log)
		if err != nil {
			return err
		}
		out["decode"] = rep
		if len(rep.Failures) > 0 {
			failures = append(failures, fmt.Sprintf("%d events no longer decode", len(rep.Failures)))
		}
		if !g.json {
			if len(rep.Failures) == 0 {
				fmt.Fprintf(g.stdout, "decode: all %d events decode with the current code\n", rep.Events)
			} else {
				fmt.Fprintf(g.stdout, "decode: %d of %d events no longer decode:\n", len(rep.Failures), rep.Events)
				tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SEQ\tTYPE\tV\tERROR")
				for _, f := range rep.Failures {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", f.Seq, f.Type, f.V, f.Error)
				}
				tw.Flush()
			}
		}
	}
	if g.json {
		if err := writeJSONValue(g.stdout, out); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return withCode(exitError, errors.New(strings.Join(failures, "; ")))
	}
	return nil
}

func writeCheckReport(w io.Writer, rep *replay.CheckReport) {
	if rep.Identical {
		fmt.Fprintf(w, "check: identical — %d view files match the re-projection of %d events (log at seq %d)\n", rep.Files, rep.Events, rep.LastSeq)
		return
	}
	fmt.Fprintf(w, "check: %d of %d view files diverge from the re-projection of %d events (log at seq %d)\n", len(rep.All), rep.Files, rep.Events, rep.LastSeq)
	for i, d := range rep.All {
		head := "   "
		if i == 0 {
			head = "first"
		}
		size := func(n int64) string {
			if n < 0 {
				return "missing"
			}
			return strconv.FormatInt(n, 10) + " bytes"
		}
		fmt.Fprintf(w, "%s %s at byte %d (live %s, replayed %s)\n", head, d.File, d.Offset, size(d.LiveSize), size(d.ShadowSize))
		if d.Event != nil {
			fmt.Fprintf(w, "      produced by seq %d %s %s stream=%s req=%s\n", d.Seq, d.Event.ISOTime(), d.Event.Type, d.Event.Stream, replayDash(d.Event.Req))
		} else {
			fmt.Fprintln(w, "      no event produced these live bytes (written outside the log, or the file was lost)")
		}
		fmt.Fprintf(w, "      live:     %q\n      replayed: %q\n", d.Live, d.Shadow)
	}
}

// newReplayPrintCmd builds 'cmlab replay print'.
func newReplayPrintCmd(g *globalOpts) *cobra.Command {
	var types []string
	var f replay.Filter
	var since, until string
	c := &cobra.Command{
		Use:   "print",
		Short: "Print the log's events, filtered, as a table or JSON lines",
		Long: `Print events in log order. Filters combine (all must match):
  --type T        exact type, or a prefix ending in "." or "*" (repeatable: --type pty. --type step.*)
  --stream S      aggregate id: Lab session, conversation, mandate
  --req R         request id
  --from/--to     sequence range (inclusive)
  --start/--until time range (inclusive; RFC 3339 or unix ms)
--json prints one object per line: the envelope with the payload decoded.`,
		Example: `  cmlab replay print --type experiment. --json
  cmlab replay print --stream demo --from 10 --to 40`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			if since != "" {
				if f.Since, err = parseReplayTime(since); err != nil {
					return &usageError{"--start: " + err.Error()}
				}
			}
			if until != "" {
				if f.Until, err = parseReplayTime(until); err != nil {
					return &usageError{"--until: " + err.Error()}
				}
			}
			if f.To != 0 && f.From > f.To {
				return &usageError{"--from is after --to"}
			}
			if err := checkEventTypes(types, replayTypeMatch, `a prefix ends in "." or "*"`); err != nil { // event_types.go
				return err
			}
			f.Types = types
			log, err := replay.OpenLogArchive(h.WALDir(), g.archive)
			if err != nil {
				return err
			}
			_, err = replay.Print(cmd.Context(), log, f, g.stdout, g.json)
			return err
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&types, "type", nil, "event type or prefix (repeatable)")
	fl.StringVar(&f.Stream, "stream", "", "stream (aggregate id)")
	fl.StringVar(&f.Req, "req", "", "request id")
	fl.Uint64Var(&f.From, "from", 0, "first sequence")
	fl.Uint64Var(&f.To, "to", 0, "last sequence")
	// --since is a cursor everywhere else (feedback poll, pty blocks): the
	// earliest time is --start; the old name still works, hidden.
	fl.StringVar(&since, "start", "", "earliest time (RFC 3339 or unix ms)")
	fl.StringVar(&since, "since", "", "")
	fl.MarkHidden("since")
	fl.StringVar(&until, "until", "", "latest time (RFC 3339 or unix ms)")
	return c
}

// newReplayStepsCmd builds 'cmlab replay steps MANDATE --what-if'.
func newReplayStepsCmd(g *globalOpts) *cobra.Command {
	var whatIf bool
	c := &cobra.Command{
		Use:   "steps MANDATE_ID --what-if",
		Short: "For every transition of a mandate, what recovery would decide had the process died right after it",
		Long: `Replay a mandate's step transitions and, after each one, classify every step
with the recovery classifier as if the process had died right then.

World hashes are those recorded in the log at that point (a step's post_hash
once completed, else its observed_pre_hash; "unknown" before it executed),
not the files as they are now. For a transition that leaves a step executing,
a second verdict assumes its side effect landed before the crash (the world
equals expected_post_hash, or is simply not the pre-state when the step
declares none). A point is FRAGILE when either verdict needs a human
(manual_review): a crash there pauses the mandate.`,
		Example: `  cmlab replay steps demo-mandate --what-if
  cmlab replay steps demo-mandate --what-if --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !whatIf {
				return &usageError{"replay steps needs --what-if"}
			}
			log, err := openHomeLog(g)
			if err != nil {
				return err
			}
			res, err := replay.WhatIf(cmd.Context(), log, args[0])
			if err != nil {
				return err
			}
			return printResult(g, res, writeWhatIf)
		},
	}
	c.Flags().BoolVar(&whatIf, "what-if", false, "classify the mandate after each transition")
	return c
}

func writeWhatIf(w io.Writer, res *replay.WhatIfResult) {
	fmt.Fprintf(w, "mandate %s: %d transitions. Verdict per step had the process died right after each\n", res.MandateID, len(res.Points))
	fmt.Fprintln(w, "(world hashes as recorded in the log at that point; FRAGILE: a crash there needs a human)")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTRANSITION\tSTEP\tSTATUS\tVERDICT\tREASON\tWORLD")
	for _, pt := range res.Points {
		tr := strings.TrimPrefix(pt.Type, "step.")
		if pt.StepID != "" {
			tr += " " + pt.StepID
		}
		if pt.Fragile {
			tr += "  FRAGILE"
		}
		for i, s := range pt.Steps {
			seq := ""
			if i == 0 {
				seq = strconv.FormatUint(pt.Seq, 10)
			} else {
				tr = ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", seq, tr, s.StepID, s.Status, s.Verdict.Kind, s.Verdict.Evidence.Reason, s.World)
			if l := pt.Landed; l != nil && l.StepID == s.StepID {
				fmt.Fprintf(tw, "\t\t\t(side effect landed)\t%s\t%s\t%s\n", l.Verdict.Kind, l.Verdict.Evidence.Reason, l.World)
			}
		}
	}
	tw.Flush()
}

// openHomeLog opens the log of the home for reading (without its lock).
func openHomeLog(g *globalOpts) (*replay.Log, error) {
	h, err := g.Home()
	if err != nil {
		return nil, err
	}
	return replay.OpenLogArchive(h.WALDir(), g.archive)
}

// replayProgressEvery is how often long replays report progress on stderr.
const replayProgressEvery = 2 * time.Second

// replayTicker returns a function that is true at most once every
// replayProgressEvery, never during the first interval (short runs print
// no progress).
func replayTicker() func() bool {
	next := time.Now().Add(replayProgressEvery)
	return func() bool {
		now := time.Now()
		if now.Before(next) {
			return false
		}
		next = now.Add(replayProgressEvery)
		return true
	}
}

// parseReplayTime reads RFC 3339 (with or without fractional seconds) or unix milliseconds.
func parseReplayTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want RFC 3339 (2026-02-06T12:00:00Z) or unix milliseconds, got %q", s)
	}
	return t, nil
}

func replayISO(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func replayDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

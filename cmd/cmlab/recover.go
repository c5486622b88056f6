package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
)

// newRecoverCmd builds 'cmlab recover [--apply] [--salvage] [--json]'.
func newRecoverCmd(g *globalOpts) *cobra.Command {
	var apply, salvage, wait, all bool
	var from salvageSource
	var waitTimeout time.Duration
	c := &cobra.Command{
		Use:   "recover",
		Short: "Decide, step by step, what a crash left done, retryable or in need of a human",
		Long: `Recovery in the order of SPEC §8: open the log (a torn tail is cut and
quarantined), bring the views up to it, rebuild every durable step from its
transitions and classify it with world hashes computed now:

  already_done   the log recorded its completion, or the world now equals
                 its expected post state        → completed (recovered)
  safe_to_retry  it never reached executing, or the world still equals its
                 pre state                      → reset to pending, same idem_key
  manual_review  it was interrupted and the world tells nothing certain
                 (or it was marked for review)  → needs_review, mandate paused
  in_flight      its recorded process (same pid and start time) or a
                 process of its group still runs → nothing, until it ends

then print the plan (STEP, STATUS, VERDICT, EVIDENCE, ACTION) of the steps
that need something — completed steps with nothing to do are counted, and
listed with --all (--json always lists every step). --apply
appends the decisions, closes terminal blocks and sessions left open (one
pty.block.end each, reason daemon_crashed) and records a recovery.applied
event; a second --apply appends nothing. Resume a mandate afterwards with
'cmlab run MANDATE.json'.

With a daemon running, the plan is computed and applied by the daemon (it
holds the log; this command never takes the lock then); steps moved by the
daemon's own runners are left alone. --salvage needs the daemon stopped.

Corruption of acknowledged log entries (not a torn tail) stops here with
exit code 3 naming segment, offset and sequence. --salvage --apply then
keeps every intact entry, moves the damaged bytes to quarantine/, writes a
wal.salvaged placeholder at each lost sequence number and lists them —
except where a copy holds them: damaged archived segments are salvaged in
their archive, a damaged or lost wal/MANIFEST is refused (the fix is
'cmlab compact --repair-manifest'), and seqs the home shipped to NATS are
refused unless --from-nats URL, which writes them back from the stream byte
for byte.

A step in flight is never reset or completed: --apply applies the other
decisions and exits 4 naming its pid; with --wait it first waits (up to
--wait-timeout) until no step's process runs, then applies.

Exit codes: 0 ok, 1 error, 3 corruption needs --salvage, 4 steps await
manual review or are in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait && !apply {
				return &usageError{"--wait goes with --apply"}
			}
			ctx := cmd.Context()
			if wait {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, waitTimeout)
				defer cancel()
			}
			return recoverHome(ctx, g, apply, salvage, wait, all, from)
		},
	}
	c.Flags().BoolVar(&apply, "apply", false, "append the decisions (default: only print the plan)")
	c.Flags().BoolVar(&salvage, "salvage", false, "with --apply: salvage a log whose acknowledged entries are damaged")
	c.Flags().BoolVar(&wait, "wait", false, "with --apply: wait until no step's process still runs, then apply")
	c.Flags().StringVar(&from.nats, "from-nats", "", "with --salvage: take lost entries back from the home's JetStream stream at `URL` (checked with state/ship-key) instead of placeholders")
	c.Flags().StringVar(&from.creds, "creds", "", "with --from-nats: NATS credentials file")
	c.Flags().DurationVar(&waitTimeout, "wait-timeout", 10*time.Minute, "how long --wait waits")
	c.Flags().BoolVar(&all, "all", false, "list every step, completed ones included (default: only those that need something; --json always lists every step)")
	return c
}

// inFlightPoll is how often --wait looks again at steps in flight.
const inFlightPoll = 100 * time.Millisecond

// waitInFlight polls plan until it shows no step in flight.
func waitInFlight(ctx context.Context, g *globalOpts, plan func() (*recovery.Plan, error)) error {
	said := map[int]bool{}
	for {
		p, err := plan()
		if err != nil {
			return err
		}
		fl := p.InFlight()
		if len(fl) == 0 {
			return nil
		}
		for _, s := range fl {
			if !said[s.RunningPid()] {
				said[s.RunningPid()] = true
				fmt.Fprintf(g.stderr, "cmlab recover: waiting for %s/%s: pid %d still runs\n", s.MandateID, s.StepID, s.RunningPid())
			}
		}
		select {
		case <-ctx.Done():
			return withCode(exitNeedReview, fmt.Errorf("%d step(s) still in flight (first: %s/%s, pid %d): %w", len(fl), fl[0].MandateID, fl[0].StepID, fl[0].RunningPid(), context.Cause(ctx)))
		case <-time.After(inFlightPoll):
		}
	}
}

func recoverHome(ctx context.Context, g *globalOpts, apply, salvage, wait, all bool, from salvageSource) error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	var plan *recovery.Plan
	var views *projections.RegenerateReport
	if info, err := labapi.ReadDaemonInfo(h); err == nil {
		if salvage {
			return fmt.Errorf("the daemon (pid %d, %s) holds the log: stop it before --salvage, which rewrites segment files", info.Pid, info.Listen)
		}
		c, closeFn, err := daemon.Dial(ctx, h)
		if err != nil {
			return err
		}
		defer closeFn()
		plan = &recovery.Plan{}
		if wait {
			err := waitInFlight(ctx, g, func() (*recovery.Plan, error) {
				p := &recovery.Plan{}
				return p, labErr(c.Do(ctx, http.MethodGet, "/api/recovery/plan", "", nil, p))
			})
			if err != nil {
				return err
			}
		}
		if apply {
			err = c.Do(ctx, http.MethodPost, "/api/recovery/apply", "", nil, plan)
		} else {
			err = c.Do(ctx, http.MethodGet, "/api/recovery/plan", "", nil, plan)
		}
		if err != nil {
			return labErr(err)
		}
	} else {
		if plan, views, err = recoverLocal(ctx, g, apply, salvage, wait, from); err != nil {
			return err
		}
	}
	if g.json {
		if err := labPrintJSON(g, salvageJSON(plan, views)); err != nil {
			return err
		}
	} else if err := shownPlan(plan, all).WriteTable(g.stdout); err != nil {
		return err
	} else {
		writeRegenerated(g.stdout, "salvage", views)
		if !apply {
			if _, err := labapi.ReadDaemonInfo(h); err != nil {
				printLeftOpen(g.stdout, leftOpenBlocks(h)) // leftopen.go
			}
		}
	}
	if n := plan.AwaitingReview(); n > 0 {
		return withCode(exitNeedReview, fmt.Errorf("%d step(s) await manual review: inspect their world, then `cmlab step complete|fail|reset`", n))
	}
	if fl := plan.InFlight(); len(fl) > 0 {
		return withCode(exitNeedReview, fmt.Errorf("%d step(s) in flight: %s/%s's process (pid %d) still runs; nothing is decided about it until it ends: wait, or `cmlab recover --apply --wait`", len(fl), fl[0].MandateID, fl[0].StepID, fl[0].RunningPid()))
	}
	return nil
}

// recoverLocal opens the home in this process (no daemon runs). After a
// salvage that rewrote the log it also returns what regenerating the
// views from it changed (recover_salvage.go).
func recoverLocal(ctx context.Context, g *globalOpts, apply, salvage, wait bool, from salvageSource) (_ *recovery.Plan, views *projections.RegenerateReport, _ error) {
	h, err := g.Home()
	if err != nil {
		return nil, nil, err
	}
	var salvaged []recovery.SalvagedEntry
	var rewritten bool
	if salvage {
		if !apply {
			fmt.Fprintln(g.stderr, "cmlab recover: --salvage rewrites the log only with --apply; checking it now")
		} else {
			if err := h.Ensure(); err != nil {
				return nil, nil, err
			}
			if salvaged, rewritten, err = salvageLog(h, from); err != nil {
				return nil, nil, fmt.Errorf("salvage: %w", err)
			}
		}
	}
	// A salvage that rewrote the log leaves views projected from entries
	// it lost: they are regenerated from the salvaged log.
	eng, err := engine.Open(ctx, engine.Options{Home: h, RebuildViews: rewritten})
	if err != nil {
		if errors.Is(err, wal.ErrCorrupt) {
			msg := "%w"
			// Name every damaged place, not only the first Open met.
			if rep, _ := wal.Verify(h.WALDir()); len(rep.Bad) > 0 { // Verify also returns ErrCorrupt then
				msg += fmt.Sprintf("\n  %d damaged place(s) in the log:", len(rep.Bad))
				for _, b := range rep.Bad {
					msg += "\n    " + b.String()
				}
			}
			if errors.Is(err, wal.ErrBadManifest) {
				return nil, nil, withCode(exitCorrupt, fmt.Errorf(msg, err)) // the fix: compact --repair-manifest (errors.go)
			}
			msg += "\n  fix: `cmlab recover --salvage --apply` keeps every intact entry, moves the damaged bytes to quarantine/ and puts a wal.salvaged placeholder at each lost seq"
			return nil, nil, withCode(exitCorrupt, fmt.Errorf(msg, err))
		}
		if errors.Is(err, wal.ErrLocked) {
			return nil, nil, fmt.Errorf("%w\n  fix: another process holds the log; if it is a daemon, run `cmlab recover` while it answers (state/daemon.json), else wait for it to finish", err)
		}
		return nil, nil, err
	}
	defer eng.Close()
	views = eng.Regenerated()
	j, err := steps.NewJournal(eng)
	if err != nil {
		return nil, views, err
	}
	if wait {
		if err := waitInFlight(ctx, g, func() (*recovery.Plan, error) { return recovery.Recover(j, recovery.PlanOptions{}), nil }); err != nil {
			return nil, views, err
		}
	}
	plan := recovery.Recover(j, recovery.PlanOptions{})
	plan.Salvaged = salvaged
	if apply {
		closed, err := pty.CloseCrashed(ctx, eng)
		if err != nil {
			return nil, views, fmt.Errorf("closing terminal blocks left open: %w", err)
		}
		plan.ClosedTerminal = closed
		if _, err := recovery.Apply(ctx, j, plan, recovery.ApplyOptions{}); err != nil {
			return nil, views, err
		}
	}
	return plan, views, nil
}

// shownPlan is the plan as the table shows it: every step with --all,
// else only those that need something (recovery.Plan.NeedsAttention).
func shownPlan(p *recovery.Plan, all bool) *recovery.Plan {
	if all {
		return p
	}
	return p.NeedsAttention()
}

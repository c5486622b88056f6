package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/fuzz/torture"
	"github.com/spf13/cobra"
)

type tortureOpts struct {
	rounds     int
	duration   time.Duration
	seed       uint64
	keep       bool
	workers    int
	minLoad    time.Duration
	maxLoad    time.Duration
	dir        string
	verbose    bool
	corruption bool
	sample     int
	compact    bool
	damage     bool
	only       []string
	nats       string
}

// newTortureCmd builds 'cmlab torture': the crash loop of package
// fuzz/torture against this very binary.
func newTortureCmd(g *globalOpts) *cobra.Command {
	o := &tortureOpts{}
	c := &cobra.Command{
		Use:   "torture",
		Short: "Crash-loop a daemon under mixed load and check every invariant after each SIGKILL",
		Long: `Start 'cmlab serve' (this binary) on a temporary home bound to 127.0.0.1:0,
drive a mixed load (feedback with and without request ids and retries,
imports and re-imports, experiment creates and submits, cursor polls, an
event-stream reader), SIGKILL the daemon at a random moment, restart it and
check: every acknowledged write present exactly once, lost answers resent
act at most once, views identical to a rebuild, old cursors still valid,
the event stream without duplicates, health ok.

Prints a summary table. On any violation it exits 1, keeps the home and
prints the seed to reproduce the run's choices with --seed.

--corruption runs the corruption campaign instead (no daemon): wal verify
must place every flipped byte and truncation, open must repair the tail and
refuse mid-log damage, salvage must keep every intact event.

--damage runs the damage matrix instead: every kind of file a home holds
(home.Kinds) x every damage (flip, truncate, delete, another home's copy,
symlink elsewhere or into wal/, unreadable, disk full, a stale daemon.json
whose pid and port another process holds) x every command that opens a
home (serve, status, recover, recover --salvage --apply, compact, wal
verify, rebuild, in-process writes), each from a copy of one fixture home.
It checks: no crash, no acknowledged event lost while a copy exists, no exit
0 while history is missing, every failure names its fix, nothing sent to an
unproven listener. Whole by default; --sample N runs a seeded sample;
--only PREFIX runs the cases whose kind/damage/command starts with it.
--nats URL (a NATS server with JetStream; this binary holds none) ships
the fixture there, so the ship kinds (state/ship.json, ship.lock,
ship-key, the archive's ship-key) and 'cmlab restore' join the matrix;
without it they are n/a.`,
		Example: `  cmlab torture --rounds 5
  cmlab torture --duration 10m --rounds 100000
  cmlab torture --seed 1234 --rounds 20 --keep
  cmlab torture --corruption --sample 200
  cmlab torture --damage --sample 40 --seed 7
  cmlab torture --damage --only segment/truncate/ --only archive-dir/
  cmlab torture --damage --nats nats://127.0.0.1:4222 --only ship`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := torture.Options{
				Binary: bin, Rounds: o.rounds, Duration: o.duration, Seed: o.seed, Keep: o.keep,
				Workers: o.workers, MinLoad: o.minLoad, MaxLoad: o.maxLoad, Dir: o.dir, Out: g.stdout, Compact: o.compact,
			}
			if o.damage {
				do := torture.DamageOptions{Binary: bin, Dir: o.dir, Sample: o.sample, Seed: o.seed, Keep: o.keep, Out: g.stdout, NATS: o.nats}
				if len(o.only) > 0 {
					do.Filter = func(c torture.DamageCase) bool {
						for _, p := range o.only {
							if strings.HasPrefix(c.String(), p) {
								return true
							}
						}
						return false
					}
				}
				_, err := torture.RunDamage(ctx, do)
				if errors.Is(err, torture.ErrViolations) {
					return withCode(exitError, err)
				}
				if err != nil {
					return fmt.Errorf("damage matrix: %w", err)
				}
				return nil
			}
			if o.corruption {
				_, err := torture.RunCorruption(ctx, torture.CorruptionOptions{Dir: o.dir, Sample: o.sample, Seed: o.seed, Out: g.stdout})
				if errors.Is(err, torture.ErrViolations) {
					return withCode(exitError, err)
				}
				return err
			}
			if o.verbose {
				opts.DaemonLog = g.stderr
			}
			_, err = torture.Run(ctx, opts)
			if errors.Is(err, torture.ErrViolations) {
				return withCode(exitError, err)
			}
			if err != nil {
				return fmt.Errorf("torture harness: %w", err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&o.rounds, "rounds", 5, "kill/restart rounds")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (whichever of --rounds and --duration comes first)")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the run's choices (0: from the clock; printed)")
	f.BoolVar(&o.keep, "keep", false, "keep the temporary home even without violations")
	f.IntVar(&o.workers, "workers", 4, "concurrent load clients")
	f.DurationVar(&o.minLoad, "min-load", 300*time.Millisecond, "shortest load before a kill")
	f.DurationVar(&o.maxLoad, "max-load", 1500*time.Millisecond, "longest load before a kill")
	f.StringVar(&o.dir, "dir", "", "where to make the temporary home (default the system temp dir)")
	f.BoolVar(&o.verbose, "verbose", false, "copy the daemons' output to stderr")
	f.BoolVar(&o.corruption, "corruption", false, "run the corruption campaign instead: every byte flip and truncation point of the last two segments of a generated log")
	f.IntVar(&o.sample, "sample", 0, "with --corruption: try this many random cases of each kind; with --damage: run this many random cases of the matrix (0: all)")
	f.BoolVar(&o.damage, "damage", false, "run the damage matrix instead: every file kind of a home x every damage x every command that opens a home")
	f.StringVar(&o.nats, "nats", "", "with --damage: URL of a NATS server with JetStream to ship the fixture to, so the ship kinds and restore run (else n/a)")
	f.StringArrayVar(&o.only, "only", nil, "with --damage: run only the cases whose kind/damage/command starts with this (repeatable), e.g. segment/truncate/")
	f.BoolVar(&o.compact, "compact", false, "compact the log: 8 KiB segments, the daemon's policy every 100 ms, and cmlab compact --archive after every kill")
	return c
}

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
)

type serveOpts struct {
	listen          string
	allowRemote     bool
	allowRoots      []string
	taskCompare     string
	taskReview      string
	exitAfterSubmit int
	readOnly        bool
	lookback        time.Duration
	quiet           bool
	ui              string
	compact         compactPolicyOpts
	ptyIdle         time.Duration
	ptyMaxShells    int
	ptyBlockCap     int64 // pty.Options.BlockOutputCap (serve_flags.go)
	ptyConvCap      int64 // pty.Options.ConversationOutputCap
	ptyTotalCap     int64 // pty.Options.TotalOutputCap
	writable        bool  // serve a replayed home writable (replayed_home.go)
	maxConns        int
	ship            shipOpts
	security        securityServeOpts // serve_security.go
}

// newServeCmd builds 'cmlab serve'.
func newServeCmd(g *globalOpts) *cobra.Command {
	o := &serveOpts{}
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: the Lab API, terminal bridge and event stream over the log",
		Long: `Run the cmlab daemon for the home.

Start-up: open the log (repair a torn tail, bring the views up to the log),
run start-up recovery, start the terminal manager, append lab.session.started,
listen, and write state/daemon.json so that CLI commands use this daemon.

The API is wire-compatible with content-machine's Experiment Lab: GET
/api/config gives the session id and the Lab token; every Lab POST needs it
in X-CM-LAB-TOKEN. The Lab token opens the Lab routes only: the terminal,
steps, recovery, /metrics, /mcp and the full event stream need the operator
token, which only state/token holds (the CLI and cmlab mcp read it). serve
refuses a home, state/ or state/token that group or others can access, or
that another user owns.

The daemon listens on loopback unless --listen says otherwise (a non-loopback
address needs --allow-remote and prints a warning); --listen 127.0.0.1:0 picks
a free port (printed, and written to daemon.json).

--read-only serves a replayed home and refuses every write; on a read-only
filesystem it serves a private temporary copy of the home and writes no
state/daemon.json.

SIGINT/SIGTERM (or 'cmlab stop') stop accepting, drain requests, close
terminals, checkpoint the views and remove state/daemon.json. The daemon's
log goes to stderr and to state/daemon.log (rotated at 10 MiB, 3 kept;
'cmlab logs -f' follows it). A home made by 'cmlab replay --into' is served
read-only unless --writable.`,
		Example: `  cmlab serve
  cmlab serve --listen 127.0.0.1:0 --allow-root ~/renders
  cmlab serve --task-compare exp_… --exit-after-submit 1
  cmlab serve --home ./replayed --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			endProfile := startProfile() // bench_start.go: CMLAB_START_PROFILE
			defer endProfile()
			h, err := g.Home()
			if err != nil {
				return err
			}
			if o.taskCompare != "" && o.taskReview != "" {
				return &usageError{"--task-compare and --task-review are exclusive"}
			}
			if o.maxConns < 0 {
				return &usageError{"--max-conns must be ≥ 0"}
			}
			if o.exitAfterSubmit < 0 {
				return &usageError{"--exit-after-submit must be ≥ 0"}
			}
			warning, err := daemon.CheckListen(o.listen, o.allowRemote)
			if err != nil {
				return &usageError{err.Error()}
			}
			if err := checkListenPort(o.listen); err != nil { // init_home.go: before anything touches the disk
				return err
			}
			if warning != "" {
				fmt.Fprintln(g.stderr, "cmlab serve: "+warning)
			}
			o.writable = g.writable // a global flag: every write honours it (inprocess.go)
			if err := serveReplayedGuard(h, o, g.stderr); err != nil {
				return err
			}
			var task *labapi.Task
			switch {
			case o.taskCompare != "":
				task = &labapi.Task{Type: "compare", ExperimentID: o.taskCompare}
			case o.taskReview != "":
				task = &labapi.Task{Type: "review", RunID: o.taskReview}
			}
			policy, err := o.compact.policy()
			if err != nil {
				return err
			}
			if policy != nil && policy.Archive != "" {
				// Refused at start, not at the first compaction an hour on
				// (where --quiet would hide it): wal/ under another name.
				if err := wal.CheckArchiveDir(h.WALDir(), policy.Archive); err != nil {
					return &usageError{msg: "--compact-archive: " + err.Error()}
				}
			}
			dl, err := newDaemonLogger(h, g.stderr, o.quiet) // serve_log.go
			if err != nil {
				return err
			}
			defer dl.Close()
			logger := dl.Logger
			ctx, stop := stopOnSignal(cmd.Context(), logger) // serve_log.go
			defer stop()
			var sidecar func(context.Context) error
			if o.ship.nats != "" {
				if sidecar, err = shipSidecar(h, &o.ship, logger); err != nil {
					return err
				}
			}
			logger.Info("starting", "version", labapi.Version, "pid", os.Getpid(), "home", h.Dir, "listen", o.listen, "readOnly", o.readOnly)
			dopts := daemon.Options{
				Home: h, Listen: o.listen, AllowRemote: o.allowRemote, AllowRoots: o.allowRoots, Task: task,
				ExitAfterSubmit: o.exitAfterSubmit, ReadOnly: o.readOnly, Lookback: o.lookback, Logger: logger, UIDir: o.ui, MaxConns: o.maxConns,
				Compaction: policy, CompactEvery: o.compact.every, SegmentSize: o.compact.segmentSize,
				Pty:     ptyOptions(o),
				Sidecar: sidecar,
				Ready: func(info labapi.DaemonInfo) {
					endProfile()
					if g.json {
						labPrintJSON(g, info)
						return
					}
					printServing(g, h, info) // serve_operator.go
					printTask(g.stdout, info.Listen, task, o.exitAfterSubmit)
				},
			}
			o.security.apply(&dopts)
			err = daemon.Run(ctx, dopts)
			logStopped(logger, err) // serve_log.go
			return err
		},
	}
	c.SetContext(context.Background())
	f := c.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:7788", "address to listen on (loopback by default; port 0 picks one; another address needs --allow-remote)")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "allow a --listen address other machines can reach (prints a warning)")
	f.StringArrayVar(&o.allowRoots, "allow-root", nil, "extra directory runs may be imported from (repeatable)")
	f.StringVar(&o.taskCompare, "task-compare", "", "focus the Lab on comparing experiment EXP")
	f.StringVar(&o.taskReview, "task-review", "", "focus the Lab on reviewing run RUN")
	f.IntVar(&o.exitAfterSubmit, "exit-after-submit", 0, "exit after N submissions for the task (0: never)")
	f.BoolVar(&o.readOnly, "read-only", false, "refuse every write (a home made by 'cmlab replay --into' is served so unless --writable; on a read-only filesystem a private copy is served)")
	f.DurationVar(&o.lookback, "resume-window", 2*time.Hour, "auto-resume window: start-up recovery resumes mandates interrupted less than this ago (compaction keeps their events)")
	// Its old name, kept working for scripts and unit files: one meaning, one name in --help.
	f.DurationVar(&o.lookback, "lookback", 2*time.Hour, "old name of --resume-window")
	f.MarkHidden("lookback")
	f.BoolVar(&o.quiet, "quiet", false, "log warnings only (no request log)")
	f.IntVar(&o.maxConns, "max-conns", 0, "connections held open at once on the TCP port, and as many on the Unix socket; beyond it idle ones are closed first, then new ones wait (0: a quarter of the open-file limit, 16–4096)")
	f.StringVar(&o.ship.nats, "ship", "", "ship the log to NATS JetStream at URL (see 'cmlab ship'; the daemon serves on if it is unreachable)")
	o.ship.flags(c, "ship-")
	f.StringVar(&o.ui, "ui", "", "serve the Lab browser client from DIR at / (e.g. content-machine's assets/lab)")
	o.compact.flags(f)
	addPtyServeFlags(f, o)
	o.security.flags(f)
	return c
}

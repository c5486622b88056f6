// Command cmlab is the crash-safe experiment lab and agent terminal daemon
// and its operator tools. Each subcommand lives in its own file and stays
// thin: flags in, one package call, output out.
package main

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/cmlab/cmlab/cmd/internal/cmdline"
	"github.com/cmlab/cmlab/home"
	"github.com/spf13/cobra"
)

// Exit codes (SPEC §7).
const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2
	exitCorrupt    = 3 // log corruption needs --salvage
	exitNeedReview = 4 // steps await manual review
)

// exitError carries a specific exit code out of a command.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// withCode wraps err so that main exits with code.
func withCode(code int, err error) error { return &exitCodeError{code: code, err: err} }

// globalOpts are the flags every command takes.
type globalOpts struct {
	home string
	init bool // create the home if it does not exist (homecheck.go)
	json bool
	// writable: write into a home made by 'cmlab replay --into', which is
	// otherwise read-only (replayed_home.go, inprocess.go).
	writable bool
	created  bool // a home was created by --init (init_home.go): said once
	// archive: --archive DIR of the commands that read the log (replay,
	// trace, rebuild, wal dump) and of compact (see archiveFlag).
	archive string
	stdout  io.Writer
	stderr  io.Writer
	// completing: this run answers the shell's completion request
	// (cobra's __complete): only then are the flags' completion functions
	// registered (finishTree), which walks every flag of every command.
	completing bool
}

// Home resolves --home, $CMLAB_HOME, ~/.cm.
func (g *globalOpts) Home() (home.Home, error) { return home.Resolve(g.home) }

func newRootCmd(g *globalOpts) *cobra.Command {
	root := &cobra.Command{
		Use:   "cmlab",
		Short: "Crash-safe experiment lab and agent terminal over one write-ahead log",
		Long: `cmlab appends every mutation — feedback, run imports, experiment submits,
terminal blocks and output, durable step transitions — to one segmented
write-ahead log, and projects it into the JSONL views and spool files that
clients read. After a crash, 'cmlab recover' repairs the log, brings the views
back and decides, step by step, what already happened, what can be retried and
what needs a human. 'cmlab replay' turns the log into a time machine.

The home directory is --home, else $CMLAB_HOME, else ~/.cm.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.PersistentFlags().StringVar(&g.home, "home", "", "home directory (default $CMLAB_HOME, else ~/.cm)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON")
	root.PersistentFlags().BoolVar(&g.init, "init", false, "create the home if it does not exist (else commands refuse a missing home)")
	root.PersistentFlags().BoolVar(&g.writable, "writable", false, "write into a home made by 'cmlab replay --into' (read-only otherwise)")
	for _, mk := range []func(*globalOpts) *cobra.Command{
		newServeCmd, newStatusCmd, newWalCmd, newRebuildCmd, newBenchCmd,
		newFeedbackCmd, newRunsCmd, newExperimentsCmd, newExportCmd,
		newPtyCmd, newStepCmd, newRunCmd, newRecoverCmd, newReplayCmd,
		newTraceCmd, newDemoCmd, newMCPCmd, newTortureCmd, newCompactCmd,
		newShipCmd, newRestoreCmd, newOpenCmd,
	} {
		if c := mk(g); c != nil {
			root.AddCommand(c)
		}
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error { return initHome(cmd, g) } // init_home.go
	root.InitDefaultCompletionCmd()                                                                    // now, so that finishTree refuses its unknown shells (tcsh) as usage errors
	addOperatorCmds(root, g)                                                                           // version.go
	finishTree(root, g)                                                                                // cobra.go
	return root
}

func main() {
	g := &globalOpts{stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(run(g, os.Args[1:]))
}

// run executes the CLI and maps errors to exit codes; tests call it directly.
func run(g *globalOpts, args []string) int {
	g.completing = len(args) > 0 && strings.HasPrefix(args[0], cobra.ShellCompRequestCmd)
	root := newRootCmd(g)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	code := exitCodeOf(err)
	var se *silentExit
	if !errors.As(err, &se) {
		path := "cmlab"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		printError(g.stderr, g.json, path, g.home, err)
	}
	return code
}

// usageError marks errors about how a command was called.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// isUsageError: a usageError, or cobra's own flag and argument errors.
func isUsageError(err error) bool {
	_, ok := errors.AsType[*usageError](err)
	return ok || cmdline.IsCobraUsage(err)
}

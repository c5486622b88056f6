// Command cmlab-bench runs cmlab's benchmarks: the log (wal), rebuild,
// the Lab API (api, and its peer mode against another Lab server), the
// terminal (pty), shipping to NATS JetStream (ship, with an embedded NATS
// server) and the daemon's start cost (start, which measures a cmlab
// binary). It is a binary of its own so that cmlab links none of this
// machinery (no NATS server): `cmlab bench …` runs it when it is
// installed beside cmlab or on $PATH.
//
//	go install ./cmd/cmlab ./cmd/cmlab-bench
//	cmlab-bench wal --appenders 1,64
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cmlab/cmlab/cmd/internal/cmdline"
	"github.com/spf13/cobra"
)

// globalOpts are the flags every benchmark shares and its output streams.
type globalOpts struct {
	json   bool
	stdout io.Writer
	stderr io.Writer
}

// Exit codes: 0 done, 1 failed, 2 a usage error (as cmlab's).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError is a bad flag or argument (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func newRootCmd(g *globalOpts) *cobra.Command {
	root := &cobra.Command{
		Use:   "cmlab-bench",
		Short: "Measure throughput and latency of cmlab's log, rebuild, API, terminal, shipping and start",
		Long: `cmlab-bench runs cmlab's benchmarks, each a subcommand; --json prints
machine-readable results. It is built apart from cmlab (go install
./cmd/cmlab-bench) so that the cmlab binary links none of the benchmark
machinery; 'cmlab bench …' runs it.`,
		Example: `  cmlab-bench wal --appenders 1,64
  cmlab-bench api --json
  cmlab-bench start --events 100000,1000000`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON")
	for _, mk := range []func(*globalOpts) *cobra.Command{newBenchWalCmd, newBenchRebuildCmd, newBenchAPICmd, newBenchPtyCmd, newBenchShipCmd, newBenchStartCmd} {
		if sub := mk(g); sub != nil {
			root.AddCommand(sub)
		}
	}
	return root
}

func main() {
	os.Exit(run(&globalOpts{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
}

// run executes the command line and maps errors to exit codes (0, 1, 2
// for a usage error); tests call it directly.
func run(g *globalOpts, args []string) int {
	root := newRootCmd(g)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(g.stderr, "cmlab-bench: %v\n", err)
	if isUsageError(err) {
		return exitUsage
	}
	return exitError
}

// isUsageError: a usageError, or cobra's own flag and argument errors.
func isUsageError(err error) bool {
	_, ok := errors.AsType[*usageError](err)
	return ok || cmdline.IsCobraUsage(err)
}

// printResult prints a benchmark's result on stdout: the text text
// writes, or with --json v as indented JSON without HTML escaping.
func printResult[T any](g *globalOpts, v T, text func(io.Writer, T)) error {
	if !g.json {
		text(g.stdout, v)
		return nil
	}
	return cmdline.WriteJSON(g.stdout, v)
}

package main

import (
	"fmt"
	"os"

	"github.com/cmlab/cmlab/home"
	"github.com/spf13/cobra"
)

// newDemoCmd builds 'cmlab demo'.
func newDemoCmd(g *globalOpts) *cobra.Command {
	var noTerminal bool
	c := &cobra.Command{
		Use:   "demo --home DIR",
		Short: "Build a sample home to practise debugging on (see docs/debugging.md)",
		Long: `Build a sample home in --home DIR, else $CMLAB_HOME (which must not exist
or be empty; never the default ~/.cm) by
driving a real daemon on a free loopback port: three runs imported from small
artifact directories under DIR/output/runs/ (script.json and a placeholder
video.mp4), two feedback entries, an experiment and its submitted comparison
(request id demo-submit-1), and a terminal session with two blocks in a real
shell (--no-terminal writes the session as events instead).

Then it runs the mandate DIR/jobs/mandate.json through the durable step
journal and simulates a crash: s1 completed, s2's command ran but its
completion was never recorded, s3 never started. s2 declares no expected
post-state, so 'cmlab recover' will ask a human about it.`,
		Example: `  cmlab demo --home /tmp/cmdemo
  cmlab replay print --home /tmp/cmdemo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.home == "" && os.Getenv("CMLAB_HOME") == "" {
				return &usageError{"cmlab demo needs --home DIR or $CMLAB_HOME (a new directory): it never builds the sample in ~/.cm"}
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			opts := DemoOptions{Home: h, NoTerminal: noTerminal}
			if !g.json {
				opts.Log = g.stdout
			}
			res, err := Demo(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSONValue(g.stdout, res)
			}
			fmt.Fprintf(g.stdout, "demo home ready: %s (%d events; terminal via %s)\n", h.Dir, res.LastSeq, res.TerminalVia)
			fmt.Fprintf(g.stdout, "next: cmlab replay print --home %s\n", home.ShellQuote(h.Dir))
			return nil
		},
	}
	c.Flags().BoolVar(&noTerminal, "no-terminal", false, "write the terminal session as events instead of running a shell")
	return c
}

package main

import (
	"fmt"
	"os"

	"github.com/cmlab/cmlab/labapi"
	"github.com/spf13/cobra"
)

// newBenchAPICmd builds 'cmlab bench api'.
func newBenchAPICmd(g *globalOpts) *cobra.Command {
	o := labapi.BenchOptions{}
	var keep bool
	c := &cobra.Command{
		Use:   "api",
		Short: "POST /api/feedback from concurrent clients (events/s, p99) and poll at the end of large stores",
		Long: `Start a daemon on 127.0.0.1:0 over a scratch home, send --requests POST
/api/feedback from --clients concurrent clients (each with its own request id;
every answer is acknowledged only after fsync), and report events/s, p50/p99
latency, mean group-commit size and fsync p99. Then time a poll whose cursor
is the last line of a 1,000-line and a 1,000,000-line feedback.jsonl: the
poll reads only the bytes after the cursor, so the two should be close.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "cmlab-bench-api-")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			o.Dir = dir
			res, err := labapi.BenchAPI(cmd.Context(), o)
			if err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, res)
			}
			w := g.stdout
			fmt.Fprintf(w, "POST /api/feedback: %d requests, %d clients, %d errors in %v\n", res.Requests, res.Clients, res.Errors, res.Elapsed.Round(1e6))
			fmt.Fprintf(w, "  %.0f events/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms; mean group %.1f events, fsync p99 ≤ %.2f ms\n",
				res.EventsPerS, res.P50Ms, res.P99Ms, res.MaxMs, res.MeanGroup, res.FsyncP99Ms)
			for _, p := range res.Polls {
				fmt.Fprintf(w, "poll at end of %d lines (%d bytes): median %.1f µs, p99 %.1f µs\n", p.Lines, p.Bytes, p.MedianUs, p.P99Us)
			}
			if res.PollRatio > 0 {
				fmt.Fprintf(w, "  largest/smallest median: %.2f× (target ≤ 2×)\n", res.PollRatio)
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&o.Clients, "clients", 32, "concurrent POST clients")
	f.IntVar(&o.Requests, "requests", 20000, "total POSTs")
	f.IntSliceVar(&o.PollLines, "poll-lines", []int{1000, 1000000}, "feedback.jsonl sizes to poll at the end of")
	f.IntVar(&o.PollReps, "poll-reps", 200, "polls timed per size")
	f.BoolVar(&keep, "keep", false, "keep the scratch directory")
	return c
}

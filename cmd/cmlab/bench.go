package main

import "github.com/spf13/cobra"

// newBenchCmd builds 'cmlab bench', the group of benchmarks; each benchmark
// lives in its own file (bench_wal.go, bench_rebuild.go, bench_api.go, bench_pty.go).
func newBenchCmd(g *globalOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and latency of the log, rebuild, API and terminal",
	}
	for _, mk := range []func(*globalOpts) *cobra.Command{newBenchWalCmd, newBenchRebuildCmd, newBenchAPICmd, newBenchPtyCmd, newBenchShipCmd, newBenchStartCmd} {
		if sub := mk(g); sub != nil {
			c.AddCommand(sub)
		}
	}
	return c
}

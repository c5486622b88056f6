package main

import "github.com/spf13/cobra"

// newBenchCmd builds 'cmlab bench'. Not implemented yet: returns nil so the
// command is not offered.
func newBenchCmd(g *globalOpts) *cobra.Command { return nil }

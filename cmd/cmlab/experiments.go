package main

import "github.com/spf13/cobra"

// newExperimentsCmd builds 'cmlab experiments'. Not implemented yet: returns nil so the
// command is not offered.
func newExperimentsCmd(g *globalOpts) *cobra.Command { return nil }

package main

import "github.com/spf13/cobra"

// newTraceCmd builds 'cmlab trace'. Not implemented yet: returns nil so the
// command is not offered.
func newTraceCmd(g *globalOpts) *cobra.Command { return nil }

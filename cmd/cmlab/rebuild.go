package main

import "github.com/spf13/cobra"

// newRebuildCmd builds 'cmlab rebuild'. Not implemented yet: returns nil so the
// command is not offered.
func newRebuildCmd(g *globalOpts) *cobra.Command { return nil }

package main

import "github.com/spf13/cobra"

// newStatusCmd builds 'cmlab status'. Not implemented yet: returns nil so the
// command is not offered.
func newStatusCmd(g *globalOpts) *cobra.Command { return nil }

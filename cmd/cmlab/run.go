package main

import "github.com/spf13/cobra"

// newRunCmd builds 'cmlab run'. Not implemented yet: returns nil so the
// command is not offered.
func newRunCmd(g *globalOpts) *cobra.Command { return nil }

package main

import "github.com/spf13/cobra"

// newServeCmd builds 'cmlab serve'. Not implemented yet: returns nil so the
// command is not offered.
func newServeCmd(g *globalOpts) *cobra.Command { return nil }

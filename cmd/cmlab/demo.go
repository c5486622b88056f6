package main

import "github.com/spf13/cobra"

// newDemoCmd builds 'cmlab demo'. Not implemented yet: returns nil so the
// command is not offered.
func newDemoCmd(g *globalOpts) *cobra.Command { return nil }

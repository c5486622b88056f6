package main

import "github.com/spf13/cobra"

// newTortureCmd builds 'cmlab torture'. Not implemented yet: returns nil so the
// command is not offered.
func newTortureCmd(g *globalOpts) *cobra.Command { return nil }

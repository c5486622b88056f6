package main

import "github.com/spf13/cobra"

// newStepCmd builds 'cmlab step'. Not implemented yet: returns nil so the
// command is not offered.
func newStepCmd(g *globalOpts) *cobra.Command { return nil }

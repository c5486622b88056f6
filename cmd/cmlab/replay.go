package main

import "github.com/spf13/cobra"

// newReplayCmd builds 'cmlab replay'. Not implemented yet: returns nil so the
// command is not offered.
func newReplayCmd(g *globalOpts) *cobra.Command { return nil }

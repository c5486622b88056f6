package main

import "github.com/spf13/cobra"

// newBenchAPICmd: not implemented yet; nil means the command is not offered.
func newBenchAPICmd(g *globalOpts) *cobra.Command { return nil }

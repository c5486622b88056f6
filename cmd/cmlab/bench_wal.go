package main

import "github.com/spf13/cobra"

// newBenchWalCmd: not implemented yet; nil means the command is not offered.
func newBenchWalCmd(g *globalOpts) *cobra.Command { return nil }

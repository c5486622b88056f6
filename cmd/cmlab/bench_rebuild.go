package main

import "github.com/spf13/cobra"

// newBenchRebuildCmd: not implemented yet; nil means the command is not offered.
func newBenchRebuildCmd(g *globalOpts) *cobra.Command { return nil }

package main

import "github.com/spf13/cobra"

// newBenchPtyCmd: not implemented yet; nil means the command is not offered.
func newBenchPtyCmd(g *globalOpts) *cobra.Command { return nil }

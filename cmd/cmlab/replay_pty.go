package main

import "github.com/spf13/cobra"

// newReplayPtyCmd: not implemented yet; nil means the command is not offered.
func newReplayPtyCmd(g *globalOpts) *cobra.Command { return nil }

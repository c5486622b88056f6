package main

import "github.com/spf13/cobra"

// newPtyCmd builds 'cmlab pty'. Not implemented yet: returns nil so the
// command is not offered.
func newPtyCmd(g *globalOpts) *cobra.Command { return nil }

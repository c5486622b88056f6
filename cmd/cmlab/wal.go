package main

import "github.com/spf13/cobra"

// newWalCmd builds 'cmlab wal'. Not implemented yet: returns nil so the
// command is not offered.
func newWalCmd(g *globalOpts) *cobra.Command { return nil }

package main

import "github.com/spf13/cobra"

// newMCPCmd builds 'cmlab mcp'. Not implemented yet: returns nil so the
// command is not offered.
func newMCPCmd(g *globalOpts) *cobra.Command { return nil }

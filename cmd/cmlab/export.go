package main

import "github.com/spf13/cobra"

// newExportCmd builds 'cmlab export'. Not implemented yet: returns nil so the
// command is not offered.
func newExportCmd(g *globalOpts) *cobra.Command { return nil }

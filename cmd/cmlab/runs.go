package main

import "github.com/spf13/cobra"

// newRunsCmd builds 'cmlab runs'. Not implemented yet: returns nil so the
// command is not offered.
func newRunsCmd(g *globalOpts) *cobra.Command { return nil }

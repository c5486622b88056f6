package main

import "github.com/spf13/cobra"

// newRecoverCmd builds 'cmlab recover'. Not implemented yet: returns nil so the
// command is not offered.
func newRecoverCmd(g *globalOpts) *cobra.Command { return nil }

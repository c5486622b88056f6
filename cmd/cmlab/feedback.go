package main

import "github.com/spf13/cobra"

// newFeedbackCmd builds 'cmlab feedback'. Not implemented yet: returns nil so the
// command is not offered.
func newFeedbackCmd(g *globalOpts) *cobra.Command { return nil }

package main

import (
	"github.com/spf13/cobra"
)

// newStepApproveCmd builds 'cmlab step approve MANDATE_ID STEP_ID'.
func newStepApproveCmd(g *globalOpts) *cobra.Command {
	var reqID, note string
	c := &cobra.Command{
		Use:   "approve MANDATE_ID STEP_ID",
		Short: "Settle an interrupted or in-review step: its side effect happened, as planned",
		Long: `Record that you checked the step by hand and its side effect happened as its
plan says. You type no hash: the daemon hashes the world the step's plan
declares, now, and records step.completed (recovered) with that hash as the
post hash, with evidence naming your approval, the step's status before,
the plan's expected_post_hash and --note.

Only an executing (interrupted) or in-review step can be approved, never one
whose process still runs, and never one whose plan declares no world paths
(use 'cmlab step complete --post HASH --result HASH' then).`,
		Example: `  cmlab step approve deploy-42 migrate --note "checked the schema by hand"`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"step_id": args[1]}
			if note != "" {
				body["note"] = note
			}
			return stepPost(cmd, g, args[0], "approve", reqID, body)
		},
	}
	c.Flags().StringVar(&note, "note", "", "what you checked (kept in the evidence; cut to 500 characters)")
	stepRequestIDFlag(c, &reqID)
	return c
}

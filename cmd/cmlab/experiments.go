package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// newExperimentsCmd builds 'cmlab experiments create|list|get|submit'.
func newExperimentsCmd(g *globalOpts) *cobra.Command {
	return commandGroup(&cobra.Command{
		Use:     "experiments",
		Aliases: []string{"experiment", "exp"},
		Short:   "Create A/B experiments over runs, list them, and submit a comparison",
	}, newExpCreateCmd(g), newExpListCmd(g), newExpGetCmd(g), newExpSubmitCmd(g))
}

func newExpCreateCmd(g *globalOpts) *cobra.Command {
	var name, hypothesis, topic, baseline, reqID string
	var variants, questions []string
	c := &cobra.Command{
		Use:   "create",
		Short: "Create an experiment comparing a baseline run with variants (POST /api/experiments)",
		Example: `  cmlab experiments create --name "hook test" --baseline run_A --variant B=run_B \
      --question q1:yes_no_unsure:"Is the hook clearer?"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"name": name, "hypothesis": hypothesis, "topic": topic, "baselineRunId": baseline}
			vs := []map[string]string{}
			for _, v := range variants {
				label, run, ok := strings.Cut(v, "=")
				if !ok {
					label, run = "", v
				}
				vs = append(vs, map[string]string{"label": label, "runId": run})
			}
			body["variants"] = vs
			if len(questions) > 0 {
				qs := []map[string]string{}
				for _, q := range questions {
					parts := strings.SplitN(q, ":", 3)
					if len(parts) != 3 {
						return &usageError{"--question wants ID:TYPE:PROMPT, got " + q}
					}
					qs = append(qs, map[string]string{"id": parts[0], "type": parts[1], "prompt": parts[2]})
				}
				body["questions"] = qs
			}
			var out struct {
				ExperimentID string `json:"experimentId"`
			}
			if err := labCall(cmd.Context(), g, "POST", "/api/experiments", reqID, body, &out); err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, out)
			}
			fmt.Fprintln(g.stdout, out.ExperimentID)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&name, "name", "", "experiment name (default \"A/B Compare\")")
	f.StringVar(&hypothesis, "hypothesis", "", "what the experiment tests")
	f.StringVar(&topic, "topic", "", "topic")
	f.StringVar(&baseline, "baseline", "", "baseline run id (required)")
	f.StringArrayVar(&variants, "variant", nil, "LABEL=RUN_ID variant (repeatable)")
	f.StringArrayVar(&questions, "question", nil, "ID:TYPE:PROMPT, TYPE yes_no_unsure or text (repeatable)")
	f.StringVar(&reqID, "request-id", "", "idempotency key (default: a fresh UUID)")
	c.MarkFlagRequired("baseline")
	return c
}

func newExpListCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List experiments, newest first (GET /api/experiments)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw json.RawMessage
			if err := labCall(cmd.Context(), g, "GET", "/api/experiments", "", nil, &raw); err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, raw)
			}
			var out struct {
				Items []struct {
					ExperimentID, CreatedAt, Name, Status string
				} `json:"items"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EXPERIMENT\tCREATED\tSTATUS\tNAME")
			for _, e := range out.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.ExperimentID, e.CreatedAt, e.Status, e.Name)
			}
			return tw.Flush()
		},
	}
}

func newExpGetCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "get EXPERIMENT_ID",
		Short: "Show one experiment's latest record (GET /api/experiments/{id})",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw json.RawMessage
			if err := labCall(cmd.Context(), g, "GET", "/api/experiments/"+url.PathEscape(args[0]), "", nil, &raw); err != nil {
				return err
			}
			return labPrintJSON(g, raw)
		},
	}
}

func newExpSubmitCmd(g *globalOpts) *cobra.Command {
	var bodyFile, reqID string
	c := &cobra.Command{
		Use:   "submit EXPERIMENT_ID --body FILE",
		Short: "Submit the comparison of an experiment (POST /api/experiments/{id}/submit)",
		Long: `Submit an experiment's comparison once: FILE (or - for stdin) holds
{winnerVariantId, reason, answers, perRun:[{runId, variantId, ratings, notes, tags}]}.
One event records every per-run feedback entry and the experiment's new
"done" record. A second distinct submit is refused; the same --request-id
returns the first answer.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if bodyFile == "" {
				return &usageError{"--body FILE is required (use - for stdin)"}
			}
			var b []byte
			var err error
			if bodyFile == "-" {
				b, err = io.ReadAll(io.LimitReader(os.Stdin, 2<<20))
			} else {
				b, err = os.ReadFile(bodyFile)
			}
			if err != nil {
				return err
			}
			var probe any
			if err := json.Unmarshal(b, &probe); err != nil {
				return &usageError{fmt.Sprintf("--body %s is not valid JSON: %s", bodyFile, strings.TrimPrefix(err.Error(), "json: "))}
			}
			var out json.RawMessage
			if err := labCall(cmd.Context(), g, "POST", "/api/experiments/"+url.PathEscape(args[0])+"/submit", reqID, b, &out); err != nil {
				return err
			}
			return labPrintJSON(g, out)
		},
	}
	c.Flags().StringVar(&bodyFile, "body", "", "JSON file with the submission (- for stdin)")
	c.Flags().StringVar(&reqID, "request-id", "", "idempotency key (default: a fresh UUID)")
	return c
}

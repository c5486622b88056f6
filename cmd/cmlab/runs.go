package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// newRunsCmd builds 'cmlab runs import|list'.
func newRunsCmd(g *globalOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   "runs",
		Short: "Import render runs into the Lab and list them",
	}
	var topic, reqID string
	imp := &cobra.Command{
		Use:   "import PATH",
		Short: "Import a run's artifacts directory or video file (POST /api/runs/import)",
		Long: `Import a run by the real path of its artifacts directory (a file imports its
directory and records the file as the video). Re-importing an unchanged
directory returns the same run id; a changed fingerprint (video.mp4 or
script.json size/mtime) makes a new run that supersedes the old one. The
path must lie under an allowed root of the daemon (its working directory,
its output/, or a --allow-root of cmlab serve).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"path": args[0]}
			if topic != "" {
				body["topic"] = topic
			}
			var out struct {
				RunID           string `json:"runId"`
				SupersedesRunID string `json:"supersedesRunId,omitempty"`
			}
			if err := labCall(cmd.Context(), g, "POST", "/api/runs/import", reqID, body, &out); err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, out)
			}
			if out.SupersedesRunID != "" {
				fmt.Fprintf(g.stdout, "%s (supersedes %s)\n", out.RunID, out.SupersedesRunID)
				return nil
			}
			fmt.Fprintln(g.stdout, out.RunID)
			return nil
		},
	}
	imp.Flags().StringVar(&topic, "topic", "", "topic of the run")
	imp.Flags().StringVar(&reqID, "request-id", "", "idempotency key (default: a fresh UUID)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List imported runs, newest first (GET /api/runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Items []struct {
					RunID        string  `json:"runId"`
					CreatedAt    string  `json:"createdAt"`
					Topic        *string `json:"topic"`
					ArtifactsDir string  `json:"artifactsDir"`
				} `json:"items"`
			}
			var raw json.RawMessage
			if err := labCall(cmd.Context(), g, "GET", "/api/runs", "", nil, &raw); err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, raw)
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tCREATED\tTOPIC\tARTIFACTS")
			for _, r := range out.Items {
				t := ""
				if r.Topic != nil {
					t = *r.Topic
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.RunID, r.CreatedAt, t, r.ArtifactsDir)
			}
			return tw.Flush()
		},
	}
	c.AddCommand(imp, list)
	return c
}

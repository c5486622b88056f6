package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cmlab/cmlab/home"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/cmlab/cmlab/labapi"

	"github.com/spf13/cobra"
)

// newRunsCmd builds 'cmlab runs import|list'.
func newRunsCmd(g *globalOpts) *cobra.Command {
	return commandGroup(&cobra.Command{
		Use:   "runs",
		Short: "Import render runs into the Lab and list them",
	}, newRunsImportCmd(g), newRunsListCmd(g))
}

func newRunsImportCmd(g *globalOpts) *cobra.Command {
	var topic, reqID string
	c := &cobra.Command{
		Use:   "import PATH",
		Short: "Import a run's artifacts directory or video file (POST /api/runs/import)",
		Long: `Import a run by the real path of its artifacts directory (a file imports its
directory and records the file as the video). Re-importing an unchanged
directory returns the same run id; a changed fingerprint (video.mp4 or
script.json size/mtime) makes a new run that supersedes the old one. The
path must lie under an allowed root of the daemon (its working directory,
its output/, or a --allow-root of cmlab serve); a relative PATH is taken
from your working directory.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The daemon has its own working directory: a relative path
			// means the user's, so it is made absolute here.
			path, err := filepath.Abs(args[0])
			if err != nil {
				return &usageError{"PATH " + args[0] + ": " + err.Error()}
			}
			body := map[string]any{"path": path}
			if topic != "" {
				body["topic"] = topic
			}
			var out struct {
				RunID           string `json:"runId"`
				SupersedesRunID string `json:"supersedesRunId,omitempty"`
			}
			if err := labCall(cmd.Context(), g, "POST", "/api/runs/import", reqID, body, &out); err != nil {
				return importError(err, path)
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
	c.Flags().StringVar(&topic, "topic", "", "topic of the run when its script.json names none (a fallback: the title in script.json wins)")
	c.Flags().StringVar(&reqID, "request-id", "", "idempotency key (default: a fresh UUID)")
	return c
}

func newRunsListCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
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
			done, err := readLocal(g, func(h home.Home) (any, error) { return labapi.ReadRunsList(h) }, &raw)
			if !done {
				err = labCall(cmd.Context(), g, "GET", "/api/runs", "", nil, &raw)
			}
			if err != nil {
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
}

// importError explains a refused import in CLI terms: a path outside the
// allowed roots names them and the flag that adds one.
func importError(err error, path string) error {
	var ae *labapi.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Code {
	case labapi.CodeForbidden:
		var roots []string
		if rs, ok := ae.Context["allowedRoots"].([]any); ok {
			for _, r := range rs {
				if s, ok := r.(string); ok {
					roots = append(roots, s)
				}
			}
		}
		msg := "cannot import " + path + ": it is outside the directories runs may be imported from"
		if len(roots) > 0 {
			msg += " (" + strings.Join(roots, ", ") + ")"
		}
		ce := newCLIError(exitError, ae.Code, msg,
			"restart the daemon with 'cmlab serve --allow-root "+filepath.Dir(path)+"' (or a parent directory); without a daemon, run this from a directory above the run")
		ce.api = true
		return ce
	case labapi.CodeFileNotFound:
		ce := newCLIError(exitError, ae.Code, "no file or directory "+path, "check the path; import a run's artifacts directory or its video file")
		ce.api = true
		return ce
	}
	return err
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newExportCmd builds 'cmlab export'.
func newExportCmd(g *globalOpts) *cobra.Command {
	var session, path string
	c := &cobra.Command{
		Use:   "export --session SESSION_ID",
		Short: "Export a Lab session's runs, experiments and feedback (POST /api/export)",
		Long: `Write {schemaVersion, exportedAt, sessionId, runs, experiments, feedback} for
one Lab session to a JSON file under lab/exports/ in the home. --path may name
a file there (relative paths are taken inside lab/exports/); anything outside
is refused. --path - writes the export to stdout (the file under
lab/exports/ is kept too). An unknown session is an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if session == "" {
				return &usageError{"--session is required"}
			}
			body := map[string]any{"sessionId": session}
			if path != "" && path != "-" {
				body["path"] = path
			}
			var out struct {
				Path  string `json:"path"`
				Count int    `json:"count"`
			}
			if err := labCall(cmd.Context(), g, "POST", "/api/export", "", body, &out); err != nil {
				return sessionError(g, session, err) // export_session.go
			}
			if path == "-" {
				return copyExport(g, out.Path)
			}
			if g.json {
				return labPrintJSON(g, out)
			}
			fmt.Fprintf(g.stdout, "%s (%d feedback entries)\n", out.Path, out.Count)
			return nil
		},
	}
	c.Flags().StringVar(&session, "session", "", "Lab session id (lab_…)")
	c.Flags().StringVar(&path, "path", "", "output file under lab/exports/ (- for stdout)")
	c.RegisterFlagCompletionFunc("session", completeSessions(g))
	return c
}

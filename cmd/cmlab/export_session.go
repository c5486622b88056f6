package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cmlab/cmlab/labapi"
	"github.com/spf13/cobra"
)

// sessionIDs lists the Lab sessions of the home (lab/sessions/<id>/), in
// name order (ids are time-ordered UUIDs).
func sessionIDs(g *globalOpts) []string { return homeDirNames(g, filepath.Join("lab", "sessions")) }

// completeSessions completes Lab session ids.
func completeSessions(g *globalOpts) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return completeFrom(func() []string { return sessionIDs(g) })
}

// sessionError explains an export refused for an unknown session (the
// daemon checks it) by listing the home's sessions; other errors pass.
func sessionError(g *globalOpts, id string, err error) error {
	var ae *labapi.APIError
	if !errors.As(err, &ae) || ae.Code != labapi.CodeNotFound || ae.Context["sessionId"] == nil {
		return err
	}
	h, herr := g.Home()
	if herr != nil {
		return err
	}
	fix := "this home has no Lab session yet; 'cmlab serve' starts one"
	if ids := sessionIDs(g); len(ids) > 0 {
		if len(ids) > 5 {
			ids = ids[len(ids)-5:]
		}
		fix = "pass one of this home's sessions to --session: " + strings.Join(ids, ", ")
	}
	ce := newCLIError(exitError, ae.Code, fmt.Sprintf("no Lab session %s in %s", id, h.Dir), fix)
	ce.api = true
	return ce
}

// copyExport writes the export file the daemon wrote to stdout.
func copyExport(g *globalOpts, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read the export: %w", err)
	}
	defer f.Close()
	_, err = io.Copy(g.stdout, f)
	return err
}

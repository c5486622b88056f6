package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// sessionIDs lists the Lab sessions of the home (lab/sessions/<id>/), in
// name order (ids are time-ordered UUIDs).
func sessionIDs(g *globalOpts) []string {
	h, err := g.Home()
	if err != nil {
		return nil
	}
	des, err := os.ReadDir(filepath.Join(h.Dir, "lab", "sessions"))
	if err != nil {
		return nil
	}
	var out []string
	for _, de := range des {
		if de.IsDir() {
			out = append(out, de.Name())
		}
	}
	sort.Strings(out)
	return out
}

// completeSessions completes Lab session ids.
func completeSessions(g *globalOpts) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return completeFrom(func() []string { return sessionIDs(g) })
}

// checkSession refuses a session the home has never seen: exporting it
// would write an empty file and say nothing.
func checkSession(g *globalOpts, id string) error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	dir, err := h.SessionDir(id)
	if err != nil {
		return &usageError{"--session " + id + ": " + err.Error()}
	}
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fix := "this home has no Lab session yet; 'cmlab serve' starts one"
	if ids := sessionIDs(g); len(ids) > 0 {
		if len(ids) > 5 {
			ids = ids[len(ids)-5:]
		}
		fix = "pass one of this home's sessions to --session: " + strings.Join(ids, ", ")
	}
	return newCLIError(exitError, "NOT_FOUND", fmt.Sprintf("no Lab session %s in %s", id, h.Dir), fix)
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

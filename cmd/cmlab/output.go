package main

import (
	"io"

	"github.com/cmlab/cmlab/cmd/internal/cmdline"
)

// writeJSONValue writes v as indented JSON without HTML escaping: the
// --json form of the results of the commands that read the home itself
// (wal, compact, replay, trace, demo). Answers of the daemon's API are
// printed by labPrintJSON (client.go).
func writeJSONValue(w io.Writer, v any) error { return cmdline.WriteJSON(w, v) }

// printResult prints a command's result on its stdout: as JSON with
// --json, else as the text text writes.
func printResult[T any](g *globalOpts, v T, text func(io.Writer, T)) error {
	if g.json {
		return writeJSONValue(g.stdout, v)
	}
	text(g.stdout, v)
	return nil
}

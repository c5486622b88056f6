package main

import (
	"encoding/json"
	"io"
)

// writeJSONValue writes v as indented JSON without HTML escaping: the
// --json form of the results of the commands that read the home itself
// (wal, compact, replay, trace, demo). Answers of the daemon's API are
// printed by labPrintJSON (client.go).
func writeJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printResult prints a command's result on its stdout: as JSON with
// --json, else as the text text writes.
func printResult[T any](g *globalOpts, v T, text func(io.Writer, T)) error {
	if g.json {
		return writeJSONValue(g.stdout, v)
	}
	text(g.stdout, v)
	return nil
}

package cmdline

import (
	"encoding/json"
	"io"
	"strings"
)

// IsCobraUsage reports whether err is one of cobra's own flag and argument
// errors, which it returns as plain errors: a usage error (exit code 2)
// like each binary's own.
func IsCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// WriteJSON writes v as indented JSON without HTML escaping: the --json
// form of a result.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

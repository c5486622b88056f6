package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/wal"
)

// How the CLI reports a failed command: one line "cmlab: MESSAGE" on
// stderr, then "  fix: WHAT TO TYPE" when there is a fix; with --json the
// same as {"error":{"code","message","fix"}} on stderr. The exit code is the
// same either way (exitCodeOf).

// cliError is an error the CLI knows how to explain: a code (the API's,
// or one of the CLI's own: USAGE, NO_DAEMON, NO_HOME, CORRUPT, …), a
// message and the command or flag that fixes it.
type cliError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
	exit    int
	cause   error
	api     bool // an API error: its code is shown in the human form too
}

func (e *cliError) Error() string {
	if e.Fix == "" {
		return e.Message
	}
	return e.Message + "\n  fix: " + e.Fix
}

func (e *cliError) Unwrap() error { return e.cause }

// newCLIError returns a cliError that exits with exit.
func newCLIError(exit int, code, msg, fix string) *cliError {
	return &cliError{Code: code, Message: msg, Fix: fix, exit: exit}
}

// silentExit ends the CLI with a code and no message: 'cmlab pty exec'
// passing the block's exit code through, as ssh does.
type silentExit struct{ code int }

func (e *silentExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCodeOf maps an error to the process exit code.
func exitCodeOf(err error) int {
	var se *silentExit
	if errors.As(err, &se) {
		return se.code
	}
	var ce *cliError
	if errors.As(err, &ce) && ce.exit != 0 {
		return ce.exit
	}
	if isCorrupt(err) || errors.Is(err, wal.ErrArchive) {
		return exitCorrupt
	}
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	if isUsageError(err) {
		return exitUsage
	}
	return exitError
}

// describeError turns any error into the code, message and fix the user
// sees. An API error keeps its code; its fix is kept unless it speaks HTTP
// (a route or a JSON body), which a person at the CLI did not type — then
// cliFix, which knows the command, supplies one.
func describeError(cmdPath, homeFlag string, err error) cliError {
	var ce *cliError
	if errors.As(err, &ce) {
		out := *ce
		if outer := err.Error(); outer != ce.Error() {
			// Context added around it with %w: show it.
			out.Message = strings.TrimSuffix(outer, "\n  fix: "+ce.Fix)
		}
		return out
	}
	var ae *labapi.APIError
	if errors.As(err, &ae) {
		out := cliError{Code: ae.Code, Message: ae.Message, Fix: ae.Fix(), api: true}
		if speaksHTTP(out.Fix) {
			out.Fix = ""
		}
		if f := cliFix(cmdPath, ae.Code); f != "" {
			out.Fix = f
		}
		if f := messageFix(ae.Message); f != "" {
			out.Fix = f
		}
		if out.Fix == "" && (ae.Code == labapi.CodeInvalidArgument || ae.Code == labapi.CodeInvalidJSON) {
			out.Fix = "check the values against '" + cmdPath + " --help'"
		}
		out.Message = flagNames(cmdPath, out.Message)
		return out
	}
	if d, ok := busyPort(err); ok {
		return d
	}
	if d, ok := daemonGone(err, homeFlag); ok { // daemon_gone.go
		return d
	}
	if errors.Is(err, wal.ErrLocked) {
		_, holder, _ := strings.Cut(err.Error(), " is held by ")
		holder, extra, _ := strings.Cut(holder, " (")
		msg := "the log is in use by another process"
		if holder != "" {
			msg += " (" + holder + ")"
		}
		fix := "wait for that process to finish (a running 'cmlab recover', 'rebuild' or 'mcp'), or stop it; then run the command again"
		if extra = strings.TrimSuffix(extra, ")"); extra != "" {
			fix = extra // the command's own advice, e.g. rebuild's --check
		}
		return cliError{Code: "LOCKED", Message: msg + " that does not serve it as a daemon (no state/daemon.json)", Fix: fix}
	}
	if d, ok := archiveOpenError(homeFlag, err); ok { // wal_archive.go
		return d
	}
	if isCorrupt(err) {
		msg := strings.TrimPrefix(err.Error(), "engine: ")
		if errors.Is(err, wal.ErrBadManifest) {
			if i := strings.Index(msg, "\n  fix: "); i >= 0 {
				msg = msg[:i] // a salvage fix written by a caller that did not know
			}
			return cliError{Code: "CORRUPT", Message: msg, Fix: manifestFix(homeFlag)}
		}
		if strings.Contains(msg, "recover --salvage --apply") {
			return cliError{Code: "CORRUPT", Message: msg}
		}
		return cliError{Code: "CORRUPT", Message: msg, Fix: corruptFix(homeFlag)}
	}
	if isUsageError(err) {
		return cliError{Code: "USAGE", Message: err.Error(), Fix: "run '" + cmdPath + " --help'"}
	}
	if d, ok := fsErrorFix(homeFlag, err); ok {
		return d
	}
	if code, fix, ok := plainFix(cmdPath, homeFlag, err); ok { // fixes.go
		return cliError{Code: code, Message: strings.TrimPrefix(err.Error(), "engine: "), Fix: fix}
	}
	return cliError{Code: "ERROR", Message: strings.TrimPrefix(err.Error(), "engine: ")}
}

// speaksHTTP reports whether a fix names routes or request bodies.
func speaksHTTP(fix string) bool {
	for _, s := range []string{"/api/", "POST ", "GET ", "Send ", "send {", "X-CM-LAB", "{\"", "Restart the Lab"} {
		if strings.Contains(fix, s) {
			return true
		}
	}
	return false
}

// cliFixes are the fixes for API error codes as seen by the CLI commands
// whose path (without "cmlab ") starts with prefix ("" for every command),
// first match wins.
var cliFixes = []struct{ code, prefix, fix string }{
	{labapi.CodeBusy, "pty ", "see what runs with 'cmlab pty status'; interrupt it with 'cmlab pty interrupt' or end the conversation with 'cmlab pty end' (add -c ID for another conversation)"},
	{labapi.CodeInvalidCursor, "pty ", "pass the resume_cursor printed by your last 'cmlab pty wait' or 'cmlab pty read' to --from, or omit --from to start at the end of the spool"},
	{labapi.CodeInvalidCursor, "feedback", "pass the nextCursor printed by the last 'cmlab feedback poll --json' to --since, or --since 0 to start over"},
	{labapi.CodeNotFound, "pty ", "list the blocks with 'cmlab pty blocks' (add -c ID for another conversation)"},
	{labapi.CodeNotFound, "runs", "list the runs with 'cmlab runs list'"},
	{labapi.CodeNotFound, "experiments", "list the experiments with 'cmlab experiments list'"},
	{labapi.CodeNotFound, "step", "list the steps with 'cmlab step list MANDATE'"},
	{labapi.CodeDegraded, "", "see the cause with 'cmlab status'; after fixing the disk restart the daemon ('cmlab stop', then 'cmlab serve')"},
}

// cliFix is the fix for an API error code as seen by one CLI command.
func cliFix(cmdPath, code string) string {
	cmd := strings.TrimPrefix(cmdPath, "cmlab ")
	for _, f := range cliFixes {
		if code == f.code && strings.HasPrefix(cmd, f.prefix) {
			return f.fix
		}
	}
	return ""
}

// messageFix is the fix for API errors whose message names what is
// missing, whatever the command.
func messageFix(msg string) string {
	switch {
	case strings.HasPrefix(msg, "Run not found"), strings.HasPrefix(msg, "Unknown baselineRunId"), strings.Contains(msg, "variant run"):
		return "list the runs with 'cmlab runs list'; import one with 'cmlab runs import PATH'"
	case strings.HasPrefix(msg, "Experiment not found"):
		return "list the experiments with 'cmlab experiments list'"
	case strings.HasPrefix(msg, "no mandate "):
		return "list the mandates with 'cmlab step list' (no argument); a mandate exists once 'cmlab run' or 'cmlab step plan' recorded it"
	}
	return ""
}

// apiFlags maps the API's field names in a message to the flags of the
// command the user typed.
var apiFlags = map[string][]string{
	"cmlab experiments create": {"baselineRunId", "--baseline", "variants", "--variant", "questions", "--question", "hypothesis", "--hypothesis"},
	"cmlab feedback add":       {"runId", "--run", "experimentId", "--experiment", "variantId", "--variant", "ratings", "--rating"},
	"cmlab feedback poll":      {"sessionId", "--session", "since", "--since"},
	"cmlab export":             {"sessionId", "--session", "path", "--path"},
	"cmlab runs import":        {"path", "PATH"},
}

// flagNames rewrites API field names in msg as the command's flags.
func flagNames(cmdPath, msg string) string {
	pairs := apiFlags[cmdPath]
	if len(pairs) == 0 {
		return msg
	}
	return strings.NewReplacer(pairs...).Replace(msg)
}

// printError writes err as the user sees it (see the top of this file).
func printError(w io.Writer, jsonOut bool, cmdPath, homeFlag string, err error) {
	d := describeError(cmdPath, homeFlag, err)
	if jsonOut {
		b, _ := json.Marshal(map[string]any{"error": d})
		fmt.Fprintln(w, string(b))
		return
	}
	msg := d.Message
	if d.api {
		msg = d.Code + ": " + msg
	}
	fmt.Fprintln(w, "cmlab:", msg)
	if d.Fix != "" {
		fmt.Fprintln(w, "  fix:", d.Fix)
	}
}

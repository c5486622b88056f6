package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cmlab/cmlab/labapi"
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
	if isCorrupt(err) {
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
		return out
	}
	if isCorrupt(err) {
		msg := err.Error()
		if strings.Contains(msg, "recover --salvage --apply") {
			return cliError{Code: "CORRUPT", Message: msg}
		}
		return cliError{Code: "CORRUPT", Message: msg, Fix: corruptFix(homeFlag)}
	}
	if isUsageError(err) {
		return cliError{Code: "USAGE", Message: err.Error(), Fix: "run '" + cmdPath + " --help'"}
	}
	return cliError{Code: "ERROR", Message: err.Error()}
}

// speaksHTTP reports whether a fix names routes or request bodies.
func speaksHTTP(fix string) bool {
	for _, s := range []string{"/api/", "POST ", "GET ", "Send {", "send {", "X-CM-LAB", "{\""} {
		if strings.Contains(fix, s) {
			return true
		}
	}
	return false
}

// cliFix is the fix for an API error code as seen by one CLI command.
func cliFix(cmdPath, code string) string {
	cmd := strings.TrimPrefix(cmdPath, "cmlab ")
	switch {
	case code == labapi.CodeBusy && strings.HasPrefix(cmd, "pty "):
		return "see what runs with 'cmlab pty status'; interrupt it with 'cmlab pty interrupt' or end the conversation with 'cmlab pty end' (add -c ID for another conversation)"
	case code == labapi.CodeInvalidCursor && strings.HasPrefix(cmd, "pty "):
		return "pass the resume_cursor printed by your last 'cmlab pty wait' or 'cmlab pty read' to --from, or omit --from to start at the end of the spool"
	case code == labapi.CodeInvalidCursor && strings.HasPrefix(cmd, "feedback"):
		return "pass the nextCursor printed by the last 'cmlab feedback poll --json' to --since, or --since 0 to start over"
	case code == labapi.CodeNotFound && strings.HasPrefix(cmd, "pty "):
		return "list the blocks with 'cmlab pty blocks' (add -c ID for another conversation)"
	case code == labapi.CodeNotFound && strings.HasPrefix(cmd, "runs"):
		return "list the runs with 'cmlab runs list'"
	case code == labapi.CodeNotFound && strings.HasPrefix(cmd, "experiments"):
		return "list the experiments with 'cmlab experiments list'"
	case code == labapi.CodeNotFound && strings.HasPrefix(cmd, "step"):
		return "list the steps with 'cmlab step list MANDATE'"
	case code == labapi.CodeDegraded:
		return "see the cause with 'cmlab status'; after fixing the disk restart the daemon ('cmlab stop', then 'cmlab serve')"
	case code == labapi.CodeInvalidArgument:
		return "check the values against 'cmlab " + cmd + " --help'"
	}
	return ""
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

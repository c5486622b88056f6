package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// What status says about a crash when no daemon runs: that the last one
// did not stop cleanly (its state/daemon.json is still there: a clean stop
// removes it), and which steps it, or a 'cmlab run', left executing.

// uncleanStop returns the daemon state/daemon.json names when no daemon
// runs: one that did not stop cleanly. nil when the file is absent or
// unreadable.
func uncleanStop(h home.Home) *labapi.DaemonInfo {
	b, err := os.ReadFile(h.DaemonFile())
	if err != nil {
		return nil
	}
	var info labapi.DaemonInfo
	if json.Unmarshal(b, &info) != nil || info.Pid <= 0 {
		return nil
	}
	return &info
}

// printNoDaemon writes the daemon line of a home no daemon serves.
func printNoDaemon(w io.Writer, last *labapi.DaemonInfo) {
	if last == nil {
		fmt.Fprintf(w, "daemon:      not running\n")
		return
	}
	started := last.StartedAt
	if started == "" {
		started = "at an unknown time"
	}
	fmt.Fprintf(w, "daemon:      not running; the last daemon (pid %d, started %s) did not stop cleanly (killed or crashed)\n", last.Pid, started)
}

// printExecuting writes the steps left executing.
func printExecuting(w io.Writer, steps []string) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintf(w, "steps:       %d step(s) left executing: %s ('cmlab recover' says what each needs)\n", len(steps), strings.Join(steps, ", "))
}

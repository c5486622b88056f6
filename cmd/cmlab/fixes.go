package main

import (
	"errors"
	"io/fs"
	"strings"
)

// plainFix gives a code and a fix to the plain errors (not API errors)
// whose message alone would leave the user guessing what to type next.
// ok is false for the rest.
func plainFix(cmdPath, homeFlag string, err error) (code, fix string, ok bool) {
	msg := err.Error()
	home := ""
	if homeFlag != "" {
		home = " --home " + homeFlag
	}
	switch {
	case strings.Contains(msg, "no event mentions this id"):
		return "NOT_FOUND", "trace takes an id the log holds: a run_…, exp_…, fb_…, blk_… or lab_… id, a request id, a mandate or conversation id, or MANDATE/STEP; 'cmlab replay print" + home + "' lists the events", true
	case strings.Contains(msg, "target directory is not empty"):
		return "USAGE", "--into makes a new home: give it a directory that does not exist yet, or an empty one", true
	case strings.HasPrefix(msg, "views diverge"):
		return "DIVERGED", "the views differ from what the log produces: 'cmlab rebuild" + home + "' (daemon stopped) rewrites them from the log; --json gives the whole report", true
	case strings.Contains(msg, "/wal: not a directory") || strings.Contains(msg, "is not a directory") && strings.Contains(msg, "wal"):
		return "NO_HOME", "--home (or $CMLAB_HOME) must name the home's directory, not a file", true
	case cmdPath == "cmlab run" && errors.Is(err, fs.ErrNotExist):
		return "NOT_FOUND", "check the mandate file's path; 'cmlab run --help' shows what a mandate holds", true
	}
	return "", "", false
}

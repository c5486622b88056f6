package main

import (
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"syscall"
)

// A client whose daemon goes away mid-command (killed, crashed, stopped)
// sees a transport error: a refused connection, a reset, a response cut
// short. It says so in those words and names what to look at, not the
// transport's "dial tcp …: connection refused".

// daemonAtRe finds the daemon's address in the client's error
// ("daemon at http://127.0.0.1:7788: …", labapi.Client).
var daemonAtRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`daemon at (\S+?): `) })

// daemonGone describes err when it is a daemon going away, else ok is false.
func daemonGone(err error, homeFlag string) (cliError, bool) {
	var why string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		why = "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		why = "the answer was cut short"
	default:
		return cliError{}, false
	}
	msg := err.Error()
	m := daemonAtRe().FindStringSubmatch(msg)
	if m == nil {
		return cliError{}, false // not a call to the daemon
	}
	// What the command was doing, as it said it ("recording m/s1 completed: daemon at …").
	doing, _, _ := strings.Cut(msg, "daemon at ")
	doing = strings.TrimSuffix(strings.TrimSpace(doing), ":")
	out := "the daemon at " + m[1] + " went away (" + why + "): it stopped, was killed or crashed while this command used it"
	if doing != "" {
		out += " (" + doing + ")"
	}
	home := ""
	if homeFlag != "" {
		home = " --home " + homeFlag
	}
	return cliError{Code: "DAEMON_GONE", Message: out,
		Fix: "see what it left with 'cmlab status" + home + "', then 'cmlab recover" + home + "'"}, true
}

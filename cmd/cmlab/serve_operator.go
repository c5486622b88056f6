package main

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// printServing is what serve prints once it listens: the address (first
// line, which scripts read), then the home, the token, the log and how to
// stop it.
func printServing(g *globalOpts, h home.Home, info labapi.DaemonInfo) {
	if g.json {
		labPrintJSON(g, info)
		return
	}
	w := g.stdout
	fmt.Fprintf(w, "cmlab serving http://%s (session %s, pid %d)\n", info.Listen, info.SessionID, info.Pid)
	fmt.Fprintf(w, "  home:   %s\n", h.Dir)
	fmt.Fprintf(w, "  token:  %s (clients send it as X-CM-LAB-TOKEN; the CLI reads it itself)\n", info.TokenFile)
	printRoots(w, info)     // serve_security.go
	cmlab := cmlabCommand() // serve_gorun.go
	fmt.Fprintf(w, "  log:    %s ('%s logs -f --home %s')\n", daemon.DaemonLogFile(h), cmlab, home.ShellQuote(h.Dir))
	fmt.Fprintf(w, "  stop:   Ctrl+C, or '%s stop --home %s'\n", cmlab, home.ShellQuote(h.Dir))
	if cmlab != "cmlab" {
		fmt.Fprintf(w, "  binary: none on PATH; 'go install ./cmd/cmlab' puts one in $(go env GOPATH)/bin (add it to PATH)\n")
	}
}

// busyPort explains a listen address in use.
func busyPort(err error) (cliError, bool) {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return cliError{}, false
	}
	return cliError{Code: "ADDRESS_IN_USE", Message: err.Error(),
		Fix: "another program listens there (a daemon of another home? 'cmlab status --home DIR' tells); pick a free port with --listen 127.0.0.1:0"}, true
}

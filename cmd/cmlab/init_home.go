package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/spf13/cobra"
)

// --init means the same on every command that uses a home: create it
// before the command runs (wal/, state/, … : a home every command can
// read), say so once on stderr, then run the command on it. Without
// --init, a command that would otherwise make a missing home by opening
// it refuses (requireHome). 'cmlab serve' and 'cmlab demo' make their home
// themselves (after checking their flags); the commands below use none of
// their own.

// noHomeOfItsOwn are the commands --init does nothing for: they create
// their home themselves, write another one (--into), or use none.
var noHomeOfItsOwn = []string{"cmlab serve", "cmlab demo", "cmlab version", "cmlab completion", "cmlab help",
	"cmlab bench", "cmlab torture", "cmlab restore", "cmlab __complete", "cmlab mcp"}

// mustExist are the commands that open the home's log in this process
// and would make a new home by doing so: they refuse a missing one.
var mustExist = []string{"cmlab recover", "cmlab rebuild", "cmlab compact", "cmlab step", "cmlab run"}

func commandIn(path string, list []string) bool {
	for _, p := range list {
		if path == p || strings.HasPrefix(path, p+" ") {
			return true
		}
	}
	return false
}

// initHome is the root's PersistentPreRunE.
func initHome(cmd *cobra.Command, g *globalOpts) error {
	path := cmd.CommandPath()
	if commandIn(path, noHomeOfItsOwn) || cmd.HasSubCommands() {
		return nil
	}
	if cmd.Flags().Changed("into") {
		return nil // replay --into writes another home; its source must exist (the command checks)
	}
	if !g.init && !commandIn(path, mustExist) {
		return nil // the command checks its home itself (requireHome, or its own message)
	}
	_, err := g.existingHome()
	return err
}

// createHome makes h a home and says so, once per process.
func createHome(g *globalOpts, h home.Home) error {
	if err := h.Ensure(); err != nil {
		return err
	}
	if !g.created {
		g.created = true
		fmt.Fprintf(g.stderr, "cmlab: created a new home in %s\n", h.Dir)
	}
	return nil
}

// checkListenPort refuses a --listen port outside 0–65535 (or not a
// number) as a usage error, before serve creates anything.
func checkListenPort(listen string) error {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return &usageError{fmt.Sprintf("--listen %q: want host:port: %v", listen, err)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return &usageError{fmt.Sprintf("--listen %q: the port must be a number from 0 to 65535 (0 picks a free one)", listen)}
	}
	return nil
}

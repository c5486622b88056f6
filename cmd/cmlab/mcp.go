package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/mcp"
	"github.com/spf13/cobra"
)

// newMCPCmd builds 'cmlab mcp'.
func newMCPCmd(g *globalOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the agent terminal, its blocks and Lab feedback as MCP tools on stdio",
		Long: `Serve cmlab's tools over the Model Context Protocol on stdin/stdout, for an
agent's MCP client to spawn: pty_exec_wait (run a command to its end: exit
code, output, cursor), pty_exec, pty_exec_interactive, pty_send,
pty_wait_for, pty_wait_prompt, pty_expect_send, pty_interrupt,
pty_read_spool, pty_status, pty_end_session, pty_reset, blocks_since,
blocks_get, blocks_read, blocks_search, lab_session, lab_runs_list,
lab_run_get, lab_experiments_list, lab_feedback_add and lab_feedback_poll
(with wait_seconds, a long poll for the next human feedback).

When a daemon ('cmlab serve') runs for the home, every tool is a request to
its HTTP API: the daemon stays the single writer (if it restarts on another
address, cmlab mcp finds it again in state/daemon.json). When none runs, cmlab mcp
opens the home itself (log repair, start-up recovery, terminal manager) and
says so on stderr; the home is then locked until it exits.

The same tools are served over streamable HTTP at /mcp by 'cmlab serve'
(token required). stdout carries only the protocol; diagnostics go to stderr.`,
		Example: `  cmlab mcp --home ~/.cm
  # in an MCP client's config: {"command": "cmlab", "args": ["mcp"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Never create a home by accident (issue 27 item 11): the
			// same "no home" answer as every other command.
			h, err := g.existingHome()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			d, closeFn, err := mcpBackend(ctx, h, g.stderr, logger)
			if err != nil {
				return err
			}
			srv := mcp.NewServer(d, mcp.Options{Version: labapi.Version, Logger: logger})
			err = mcp.ServeStdio(ctx, srv, cmd.InOrStdin(), g.stdout)
			if errors.Is(err, context.Canceled) {
				err = nil // SIGINT/SIGTERM: a normal end
			}
			if cerr := closeFn(); err == nil {
				err = cerr
			}
			return err
		},
	}
	c.SetContext(context.Background())
	return c
}

// mcpBackend is the daemon the tools talk to: the running one over
// loopback, else an in-process server over an engine opened here, with the
// same start-up as 'cmlab serve' (daemon.Open: recovery, terminal manager,
// Lab session).
func mcpBackend(ctx context.Context, h home.Home, stderr io.Writer, logger *slog.Logger) (*mcp.Daemon, func() error, error) {
	if info, err := labapi.ReadDaemonInfo(h); err == nil {
		// The daemon is found again from state/daemon.json should it
		// restart on another address while this server runs.
		d, err := mcp.ResolvingVia(func() (string, string, error) { return mcpDaemonTarget(h) }, labapi.SocketHTTPClient(h))
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(stderr, "cmlab mcp: using the daemon at http://%s (pid %d), over its socket %s\n", info.Listen, info.Pid, h.Rel(info.Socket))
		return d, func() error { return nil }, nil
	} else if !errors.Is(err, labapi.ErrNoDaemon) {
		return nil, nil, err
	} else {
		noteStaleDaemon(stderr, err)
	}
	fmt.Fprintf(stderr, "cmlab mcp: no daemon runs for %s; opening the home in this process (start 'cmlab serve' to share it)\n", h.Dir)
	// The same home as under `cmlab serve` (package daemon): recovery
	// decides before any tool runs, resumed mandates run in the
	// background, and Close stops them and the terminals before the
	// engine closes.
	dh, err := daemon.Open(ctx, daemon.Options{Home: h, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	if err := dh.Start(ctx, "stdio"); err != nil {
		dh.Close()
		return nil, nil, err
	}
	dh.Serving()
	return mcp.InProcess(dh.Server.Handler(), dh.OperatorToken), dh.Close, nil
}

// mcpDaemonTarget is the running daemon's address and operator token
// (ReadDaemonInfo has checked it is live; the requests go over its socket).
func mcpDaemonTarget(h home.Home) (string, string, error) {
	info, err := labapi.ReadDaemonInfo(h)
	if err != nil {
		return "", "", err
	}
	tok, err := labapi.ReadOperatorToken(h, info)
	if err != nil {
		return "", "", err
	}
	return info.Listen, tok, nil
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/labapi"
	"github.com/spf13/cobra"
)

// newStopCmd builds 'cmlab stop': SIGTERM to the daemon of the home, then
// wait until it has exited — after its shutdown, which drains requests,
// ends the terminals and writes the views' checkpoint.
func newStopCmd(g *globalOpts) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon of the home gracefully and wait for it (checkpoint included)",
		Long: `Send SIGTERM to the daemon that serves the home (found in state/daemon.json)
and wait until it has exited: it stops accepting, drains requests, ends the
terminals, writes the views' checkpoint and removes state/daemon.json.
Exits 1 if it is still running after --timeout (it is not killed: see
'cmlab logs' for what it is doing).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			info, err := labapi.ReadDaemonInfo(h)
			if errors.Is(err, labapi.ErrNoDaemon) {
				return newCLIError(exitError, "NO_DAEMON", "no daemon serves the home "+h.Dir, "nothing to stop; 'cmlab status --home DIR' shows the daemon of another home")
			}
			if err != nil {
				return err
			}
			if err := syscall.Kill(info.Pid, syscall.SIGTERM); err != nil {
				return fmt.Errorf("signal daemon pid %d: %w", info.Pid, err)
			}
			if !g.json {
				fmt.Fprintf(g.stderr, "cmlab: stopping daemon pid %d at %s…\n", info.Pid, info.Listen)
			}
			deadline := time.Now().Add(timeout)
			for processRuns(info.Pid) {
				if time.Now().After(deadline) {
					return newCLIError(exitError, "TIMEOUT", fmt.Sprintf("daemon pid %d is still shutting down after %s", info.Pid, timeout),
						"see what it is doing with 'cmlab logs --home "+h.Dir+"'; wait longer with 'cmlab stop --timeout 5m'")
				}
				time.Sleep(20 * time.Millisecond)
			}
			var cp struct {
				Seq uint64 `json:"seq"`
			}
			b, _ := os.ReadFile(h.CheckpointFile())
			json.Unmarshal(b, &cp)
			if g.json {
				return labPrintJSON(g, map[string]any{"stopped": info.Pid, "checkpointSeq": cp.Seq})
			}
			_, err = fmt.Fprintf(g.stdout, "stopped daemon pid %d (checkpoint at seq %d)\n", info.Pid, cp.Seq)
			return err
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the shutdown")
	return c
}

// processRuns reports whether pid is a live process (a zombie has exited).
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}

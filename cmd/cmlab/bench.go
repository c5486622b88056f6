package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// newBenchCmd builds 'cmlab bench': the benchmarks are a binary of their
// own (cmd/cmlab-bench), so that cmlab links none of their machinery (a
// NATS server among it); this runs it with the same arguments when it is
// installed beside cmlab or on $PATH, and says how to get it otherwise.
func newBenchCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "bench [wal|rebuild|api|pty|ship|start] [flags]",
		Short: "Run the benchmarks (the separate cmlab-bench binary)",
		Long: `The benchmarks — wal, rebuild, api, pty, ship, start — are the separate
binary cmlab-bench (go install ./cmd/cmlab-bench), so that cmlab itself
links none of them. 'cmlab bench ARGS' runs 'cmlab-bench ARGS' when
cmlab-bench is installed beside cmlab or on $PATH; 'cmlab-bench --help'
lists them.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			bin, err := benchBinary()
			if err != nil {
				return err
			}
			if g.json {
				args = append([]string{"--json"}, args...)
			}
			// Become cmlab-bench: its output, exit code and signals are ours.
			return syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
		},
	}
}

// errNoBench is returned when cmlab-bench is neither beside cmlab nor on
// $PATH.
var errNoBench = errors.New("the benchmarks are the separate binary cmlab-bench, not found beside cmlab or on $PATH")

// benchBinary is cmlab-bench beside this executable, else on $PATH.
func benchBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "cmlab-bench")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("cmlab-bench"); err == nil {
		return p, nil
	}
	return "", &usageError{msg: fmt.Sprintf("%v; fix: go install ./cmd/cmlab-bench (from the cmlab source tree), or run it in place: go run ./cmd/cmlab-bench wal", errNoBench)}
}

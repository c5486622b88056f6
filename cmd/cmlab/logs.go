package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/spf13/cobra"
)

// newLogsCmd builds 'cmlab logs': the daemon's log, state/daemon.log.
func newLogsCmd(g *globalOpts) *cobra.Command {
	var follow bool
	var tail int
	c := &cobra.Command{
		Use:   "logs",
		Short: "Print the daemon's log (state/daemon.log); -f follows it",
		Long: `Print state/daemon.log of the home: the daemon's JSON log lines (requests,
recovery at start, resumed steps, warnings). --tail N prints only the last N
lines; -f keeps printing what the daemon writes, across rotations, until
Ctrl+C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			path := daemon.DaemonLogFile(h)
			f, err := os.Open(path)
			if errors.Is(err, fs.ErrNotExist) {
				return newCLIError(exitError, "NOT_FOUND", "no daemon log at "+path, "the daemon writes it from its start: 'cmlab serve --home "+h.Dir+"'")
			}
			if err != nil {
				return err
			}
			defer func() { f.Close() }()
			if tail > 0 {
				if err := skipToTail(f, tail); err != nil {
					return err
				}
			}
			off, err := io.Copy(g.stdout, f)
			if err != nil || !follow {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(200 * time.Millisecond):
				}
				// Rotated (the path is a new file) or truncated: start over on it.
				if fi, err := os.Stat(path); err == nil {
					cur, _ := f.Stat()
					if !os.SameFile(fi, cur) || fi.Size() < off {
						f.Close()
						if f, err = os.Open(path); err != nil {
							return err
						}
						off = 0
					}
				}
				n, err := io.Copy(g.stdout, f)
				if err != nil {
					return err
				}
				off += n
			}
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until Ctrl+C")
	c.Flags().IntVar(&tail, "tail", 0, "print only the last N lines (0: all)")
	return c
}

// skipToTail positions f at the start of its last n lines.
func skipToTail(f *os.File, n int) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	const chunk = 64 << 10
	var buf []byte
	pos := size
	for pos > 0 {
		step := min(int64(chunk), pos)
		pos -= step
		b := make([]byte, step)
		if _, err := f.ReadAt(b, pos); err != nil {
			return err
		}
		buf = append(b, buf...)
		// n lines end in n newlines (the last one ends the file).
		if bytes.Count(buf, []byte{'\n'}) > n {
			break
		}
	}
	// Back from the end (past the last line's own newline) to the n-th
	// newline: the lines after it are the last n.
	last := len(buf)
	if last > 0 && buf[last-1] == '\n' {
		last--
	}
	start, seen := 0, 0
	for i := last - 1; i >= 0; i-- {
		if buf[i] == '\n' {
			if seen++; seen == n {
				start = i + 1
				break
			}
		}
	}
	_, err = f.Seek(size-int64(len(buf))+int64(start), io.SeekStart)
	return err
}

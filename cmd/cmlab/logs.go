package main

import (
	"bytes"
	"errors"
	"fmt"
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
	var level, format string
	c := &cobra.Command{
		Use:   "logs",
		Short: "Print the daemon's log (state/daemon.log); -f follows it",
		Long: `Print state/daemon.log of the home: the daemon's log (start and stop,
recovery at start, resumed steps, degraded mode, compaction, shipping,
warnings, and one line per request unless it runs with --quiet).

The file holds JSON lines; --format text (the default) prints each as
"time LEVEL message key=value …", --format json (or --json) as stored.
--level warn prints warnings and errors only (debug, info, warn, error).
--tail N prints only the last N lines (counted before --level); -f keeps
printing what the daemon writes, across rotations, until Ctrl+C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			minRank, ok := parseLogLevel(level) // serve_log.go
			if !ok {
				return &usageError{fmt.Sprintf("--level %q: want debug, info, warn or error", level)}
			}
			if g.json {
				format = "json"
			}
			if format != "text" && format != "json" {
				return &usageError{fmt.Sprintf("--format %q: want text or json", format)}
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			out := &logLines{w: g.stdout, min: minRank, text: format == "text"}
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
			off, err := io.Copy(out, f)
			if err != nil || !follow {
				if err == nil {
					err = out.flush()
				}
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
				n, err := io.Copy(out, f)
				if err != nil {
					return err
				}
				off += n
			}
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until Ctrl+C")
	c.Flags().IntVar(&tail, "tail", 0, "print only the last N lines (0: all)")
	c.Flags().StringVar(&level, "level", "info", "print lines of this level and above: debug, info, warn, error")
	c.Flags().StringVar(&format, "format", "text", "text (time LEVEL message key=value) or json (the lines as stored)")
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

// logLines writes the daemon log's lines of at least level min to w, as
// text or as stored. A partial last line waits for its end (a follow may
// read a line the daemon is still writing). A line that is not JSON (none
// is, unless someone else wrote to the file) is printed as it is.
type logLines struct {
	w    io.Writer
	min  int
	text bool
	part []byte
}

func (l *logLines) Write(p []byte) (int, error) {
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.part[:i+1]
		if err := l.line(line); err != nil {
			return 0, err
		}
		l.part = l.part[i+1:]
	}
}

func (l *logLines) line(line []byte) error {
	text, level, ok := logLineText(line) // serve_log.go
	if ok && levelRank(level) < l.min {
		return nil
	}
	if ok && l.text {
		line = []byte(text)
	}
	_, err := l.w.Write(line)
	return err
}

// flush writes a last line without its newline.
func (l *logLines) flush() error {
	if len(l.part) == 0 {
		return nil
	}
	err := l.line(append(l.part, '\n'))
	l.part = nil
	return err
}

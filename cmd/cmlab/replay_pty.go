package main

import (
	"fmt"
	"io"
	"iter"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/spf13/cobra"
)

// newReplayPtyCmd builds 'cmlab replay pty <conversationId> --asciicast FILE'.
func newReplayPtyCmd(g *globalOpts) *cobra.Command {
	var out string
	var raw bool
	c := &cobra.Command{
		Use:   "pty <conversationId> --asciicast FILE",
		Short: "Write a conversation's terminal as an asciicast v2 recording, from the log",
		Long: `Read the log (without its lock; a daemon may be running) and write the
terminal of one conversation as an asciicast v2 file, with the original
timing, as it looked: each block begins with "$ <command>", the output
follows, what was typed with send shows as typing ("i" records and their
echo), "m" marks each block begin; the terminal's internal marker lines and
command wrapper are not shown. --raw writes the spool byte for byte as "o"
and what was typed as "i" records, internals included. Play it with
'asciinema play FILE'.`,
		Example: `  cmlab replay pty conv1 --asciicast conv1.cast`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &usageError{"--asciicast FILE is required"}
			}
			if err := home.ValidateID(args[0]); err != nil {
				return &usageError{err.Error()}
			}
			log, err := openHomeLog(g)
			if err != nil {
				return err
			}
			n, err := writeCast(out, args[0], log.Events(cmd.Context(), 1, 0), raw)
			if err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, map[string]any{"conversationId": args[0], "path": out, "records": n})
			}
			fmt.Fprintf(g.stdout, "wrote %d records of %s to %s\n", n, args[0], out)
			return nil
		},
	}
	c.Flags().StringVar(&out, "asciicast", "", "output file (asciicast v2)")
	c.Flags().BoolVar(&raw, "raw", false, "the spool byte for byte, internal lines included")
	return c
}

// writeCast writes the recording durably (home.WriteDurable): a
// temporary file beside path renamed into place, so a failed run leaves
// no half file. raw keeps the terminal's control sequences.
func writeCast(path, conv string, evs iter.Seq2[*events.Event, error], raw bool) (int, error) {
	write := pty.WriteAsciicastClean
	if raw {
		write = pty.WriteAsciicast
	}
	n := 0
	err := home.WriteDurable(path, home.WriteOptions{}, func(w io.Writer) (err error) {
		n, err = write(w, conv, evs)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

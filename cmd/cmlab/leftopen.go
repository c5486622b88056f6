package main

import (
	"fmt"
	"io"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/retention"
)

// leftOpenBlocks lists the terminal blocks the log of h holds open: the
// retention model's snapshot and the log after it, read without the log's
// lock (retention.Load), never the log from seq 1. Call it only when no
// daemon serves h: a daemon's open blocks are running, not left by a crash.
func leftOpenBlocks(h home.Home) []pty.LeftBlock {
	m, _, err := retention.Load(h)
	if err != nil {
		return []pty.LeftBlock{}
	}
	return m.OpenBlocks()
}

// printLeftOpen writes the blocks a crash left open, one a line, and what
// closes them; nothing when there are none.
func printLeftOpen(w io.Writer, bs []pty.LeftBlock) {
	if len(bs) == 0 {
		return
	}
	fmt.Fprintf(w, "terminal:    %d block(s) left open by a crash; 'cmlab recover --apply' (or the next 'cmlab serve') ends them as failed (daemon_crashed):\n", len(bs))
	for _, b := range bs {
		fmt.Fprintf(w, "             %s %s %q\n", b.ConversationID, b.Block.BlockID, b.Block.Cmd)
	}
}

package main

import (
	"fmt"
	"io"

	"github.com/cmlab/cmlab/engine"
)

// noteAdopted says on w what the open that just ran took from a
// content-machine home (engine/adopt.go), and each line it set aside:
// the one-shot commands' counterpart of the daemon's log line.
func noteAdopted(w io.Writer, rep *engine.AdoptReport) {
	if rep == nil {
		return
	}
	fmt.Fprintf(w, "cmlab: %s\n", rep.Summary())
	for _, s := range rep.SetAside {
		fmt.Fprintf(w, "cmlab:   %s\n", s)
	}
}

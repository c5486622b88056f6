package main

import (
	"fmt"
	"io"
	"net/url"

	"github.com/cmlab/cmlab/labapi"
)

// taskLink is the deep link a one-shot task opens at (the routes
// content-machine's client and ours share), empty without a task.
func taskLink(listen string, t *labapi.Task) string {
	if t == nil {
		return ""
	}
	base := "http://" + listen + "/#/"
	if t.Type == "compare" {
		return base + "compare/" + url.PathEscape(t.ExperimentID)
	}
	return base + "review/" + url.PathEscape(t.RunID)
}

// printTask prints the task's deep link under serve's first line.
func printTask(w io.Writer, listen string, t *labapi.Task, exitAfter int) {
	link := taskLink(listen, t)
	if link == "" {
		return
	}
	tail := ""
	if exitAfter > 0 {
		tail = fmt.Sprintf(" (the daemon stops after %d submit%s)", exitAfter, map[bool]string{true: "", false: "s"}[exitAfter == 1])
	}
	fmt.Fprintf(w, "  open:   %s%s\n", link, tail)
}

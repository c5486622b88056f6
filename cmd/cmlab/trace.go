package main

import (
	"fmt"
	"strings"

	"github.com/cmlab/cmlab/replay"
	"github.com/spf13/cobra"
)

// newTraceCmd builds 'cmlab trace ID'.
func newTraceCmd(g *globalOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   "trace ID",
		Short: "The chain of events that created and touched an id, in log order",
		Long: `Follow one id through the log: a request id, feedback id (fb_…), run id
(run_…), experiment id (exp_…), block id (blk_…), MANDATE/STEP (a step id
is only unique within its mandate), a mandate or conversation id. Every event that names it — as its request id, its stream,
or any value of its payload or response snapshot — is listed with its
sequence and where the id appears (VIA).

For a request id, the ids its response handed out (feedbackIds, experimentId,
runId, block_id …) are followed too: the trace of an experiment submit lists
the experiment's creation, the submit with the feedback entries it wrote, and
every later update of the experiment.`,
		Example: `  cmlab trace demo-submit-1
  cmlab trace demo-mandate/s2
  cmlab trace exp_01a2… --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := openHomeLog(g)
			if err != nil {
				return err
			}
			res, err := replay.Trace(cmd.Context(), log, args[0])
			if err != nil {
				return err
			}
			if g.json {
				type hit struct {
					replay.Rendered
					Via []string `json:"via"`
				}
				out := struct {
					ID      string   `json:"id"`
					Related []string `json:"related"`
					Events  []hit    `json:"events"`
				}{ID: res.ID, Related: res.Related}
				if out.Related == nil {
					out.Related = []string{}
				}
				for _, h := range res.Hits {
					out.Events = append(out.Events, hit{Rendered: replay.Render(h.Event), Via: h.Via})
				}
				return writeJSONValue(g.stdout, out)
			}
			noun := "events"
			if len(res.Hits) == 1 {
				noun = "event"
			}
			fmt.Fprintf(g.stdout, "trace %s: %d %s", res.ID, len(res.Hits), noun)
			if len(res.Related) > 0 {
				fmt.Fprintf(g.stdout, " (also following %s)", strings.Join(res.Related, ", "))
			}
			fmt.Fprintln(g.stdout)
			for _, h := range res.Hits {
				ev := h.Event
				fmt.Fprintf(g.stdout, "\nseq %d  %s  %s  stream %s  req %s\n", ev.Seq, ev.ISOTime(), ev.Type, ev.Stream, replayDash(ev.Req))
				fmt.Fprintf(g.stdout, "    %s\n", replay.Summary(ev))
				for _, v := range groupVia(h.Via) {
					fmt.Fprintf(g.stdout, "    %s\n", v)
				}
			}
			return nil
		},
	}
	archiveFlag(c.Flags(), g)
	return c
}

// groupVia turns "path=id" places into one line per id: "id: path, path".
func groupVia(via []string) []string {
	var order []string
	paths := map[string][]string{}
	for _, v := range via {
		path, id, ok := strings.Cut(v, "=")
		if !ok {
			continue
		}
		if _, seen := paths[id]; !seen {
			order = append(order, id)
		}
		paths[id] = append(paths[id], path)
	}
	out := make([]string, len(order))
	for i, id := range order {
		out[i] = id + " ← " + strings.Join(paths[id], ", ")
	}
	return out
}

package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/cmlab/cmlab/bench"
	"github.com/spf13/cobra"
)

// newBenchAPICmd builds 'cmlab-bench api'.
func newBenchAPICmd(g *globalOpts) *cobra.Command {
	o := bench.BenchOptions{}
	var keep, ownToo bool
	var peer string
	var maxBuild int
	c := &cobra.Command{
		Use:   "api",
		Short: "POST /api/feedback from concurrent clients (events/s, p99) and poll at the end of large stores",
		Long: `Start a daemon on 127.0.0.1:0 over a scratch home and drive it through the
Lab wire contract, with the load and the HTTP client of --peer: for each
--poll-lines size up to --requests, grow the store to that many lines and
time GET /api/feedback with the cursor at the start of its last line; then
send --requests POST /api/feedback from --clients concurrent clients (each
with its own request id; every answer is acknowledged only after fsync) and
report events/s, p50/p99 latency, mean group-commit size and fsync p99; then
grow and poll the larger sizes (default 1,000 and 1,000,000 lines). A poll
reads only the bytes after its cursor, so the two should be close. cmlab's
store is grown in-process (the events those POSTs append, 1,000 per
append); a peer's through POST /api/feedback.

It also prints the CPU time of the process (daemon and clients) per POST,
and one acknowledged POST by stage — read, decode, request id,
append+fsync, projection, answer, and the time outside the handler —
from a second pass of --requests POSTs with a stage recorder installed in
the daemon (docs/performance.md, "The API's POST path").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var pres *bench.PeerResult
			if peer != "" {
				var err error
				pres, err = bench.BenchPeer(cmd.Context(), bench.PeerOptions{URL: peer, Clients: o.Clients,
					Requests: o.Requests, PollLines: o.PollLines, MaxBuildLines: maxBuild, PollReps: o.PollReps, Client: o.Client})
				if err != nil {
					return err
				}
				if !ownToo {
					return printResult(g, pres, printPeer)
				}
			}
			dir, err := os.MkdirTemp("", "cmlab-bench-api-")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			o.Dir = dir
			res, err := bench.BenchAPI(cmd.Context(), o)
			if err != nil {
				return err
			}
			if pres != nil {
				return printResult(g, apiBesidePeer{CMLab: res, Peer: pres}, printBesidePeer)
			}
			return printResult(g, res, printBenchAPI)
		},
	}
	f := c.Flags()
	f.IntVar(&o.Clients, "clients", 32, "concurrent POST clients")
	f.IntVar(&o.Requests, "requests", 20000, "total POSTs")
	f.IntSliceVar(&o.PollLines, "poll-lines", []int{1000, 1000000}, "feedback.jsonl sizes to poll at the end of")
	f.IntVar(&o.PollReps, "poll-reps", 200, "polls timed per size")
	f.StringVar(&peer, "peer", "", "also drive the Lab server at this base URL (e.g. content-machine's) with the same load, through the wire contract only")
	f.BoolVar(&ownToo, "with-cmlab", true, "with --peer: also run cmlab's own daemon and print both side by side")
	f.IntVar(&maxBuild, "peer-max-build", 0, "with --peer: skip poll sizes above this many lines (building them through the peer's API is slow); 0 = build all")
	f.StringVar(&o.Client, "client", bench.ClientNetHTTP, "HTTP client of the timed POSTs: net/http (Go's transport) or raw (a keep-alive connection per client written and parsed in place: the same requests at a fraction of the client CPU, which shares the machine with the daemon)")
	f.StringVar(&o.ProfileDir, "profile", "", "write CPU, block and mutex profiles of the timed POSTs into this directory (api.cpu, api.block, api.mutex); a profiled run is slower")
	f.BoolVar(&keep, "keep", false, "keep the scratch directory")
	return c
}

// printBenchAPI prints the result of 'cmlab-bench api' (cmlab's daemon
// only) as text.
func printBenchAPI(w io.Writer, res *bench.BenchResult) {
	fmt.Fprintf(w, "POST /api/feedback: %d requests, %d clients (%s), %d errors in %v\n", res.Requests, res.Clients, res.Client, res.Errors, res.Elapsed.Round(1e6))
	fmt.Fprintf(w, "  %.0f events/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms; mean group %.1f events, fsync p99 ≤ %.2f ms, fsync %.0f%% of the run\n",
		res.EventsPerS, res.P50Ms, res.P99Ms, res.MaxMs, res.MeanGroup, res.FsyncP99Ms, res.FsyncPct)
	fmt.Fprintf(w, "  CPU %.1f µs per event (daemon and clients, user+system); %.0f allocations, %.0f bytes allocated per event\n", res.CPUUsPerEvent, res.AllocsPerEvent, res.AllocBytesPerEvent)
	printStages(w, res)
	for _, p := range res.Polls {
		fmt.Fprintf(w, "poll at end of %d lines (%d bytes): median %.1f µs, p99 %.1f µs\n", p.Lines, p.Bytes, p.MedianUs, p.P99Us)
	}
	if res.PollRatio > 0 {
		fmt.Fprintf(w, "  largest/smallest median: %.2f× (target ≤ 2×)\n", res.PollRatio)
	}
}

// apiBesidePeer is the result of 'cmlab-bench api --peer' with cmlab's
// own daemon run too.
type apiBesidePeer struct {
	CMLab *bench.BenchResult `json:"cmlab"`
	Peer  *bench.PeerResult  `json:"peer"`
}

// printBesidePeer prints the peer's result, then both side by side.
func printBesidePeer(w io.Writer, r apiBesidePeer) {
	printPeer(w, r.Peer)
	printSideBySide(w, r.CMLab, r.Peer)
}

// printStages prints the breakdown of one acknowledged POST by stage.
func printStages(w io.Writer, res *bench.BenchResult) {
	sp := res.StagePass
	if sp == nil || len(res.Stages) == 0 {
		return
	}
	fmt.Fprintf(w, "one acknowledged POST by stage (a second pass of %d POSTs with the stage recorder: %.0f events/s, mean %.2f ms, p50 %.2f ms, p99 %.2f ms)\n",
		sp.Requests, sp.EventsPerS, sp.MeanMs, sp.P50Ms, sp.P99Ms)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  stage\tmean µs\tshare\tp50 µs\tp99 µs\t\n")
	mean := sp.MeanMs * 1000
	share := func(us float64) string {
		if mean <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100*us/mean)
	}
	for _, st := range res.Stages {
		fmt.Fprintf(tw, "  %s\t%.1f\t%s\t%.1f\t%.1f\t\n", st.Stage, st.MeanUs, share(st.MeanUs), st.P50Us, st.P99Us)
	}
	fmt.Fprintf(tw, "  outside the handler\t%.1f\t%s\t\t\t\n", res.StageOutsideUs, share(res.StageOutsideUs))
	tw.Flush()
}

func printPeer(w io.Writer, p *bench.PeerResult) {
	fmt.Fprintf(w, "peer %s POST /api/feedback: %d requests, %d clients, %d errors in %v\n", p.URL, p.Requests, p.Clients, p.Errors, time.Duration(p.ElapsedNs).Round(time.Millisecond))
	fmt.Fprintf(w, "  %.0f events/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", p.EventsPerS, p.P50Ms, p.P99Ms, p.MaxMs)
	for _, q := range p.Polls {
		fmt.Fprintf(w, "peer poll at end of %d lines (%d bytes): median %.1f µs, p99 %.1f µs\n", q.Lines, q.Bytes, q.MedianUs, q.P99Us)
	}
	for _, n := range p.Skipped {
		fmt.Fprintf(w, "peer poll at end of %d lines: SKIPPED (above --peer-max-build; not built on the peer)\n", n)
	}
}

// printSideBySide prints cmlab's run and the peer's with the ratios.
func printSideBySide(w io.Writer, c *bench.BenchResult, p *bench.PeerResult) {
	fmt.Fprintf(w, "\n%-28s %14s %14s %10s\n", "", "cmlab", "peer", "cmlab/peer")
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	fmt.Fprintf(w, "%-28s %14.0f %14.0f %10s\n", "events/s", c.EventsPerS, p.EventsPerS, ratio(c.EventsPerS, p.EventsPerS))
	fmt.Fprintf(w, "%-28s %14.2f %14.2f %10s\n", "p50 ms", c.P50Ms, p.P50Ms, ratio(c.P50Ms, p.P50Ms))
	fmt.Fprintf(w, "%-28s %14.2f %14.2f %10s\n", "p99 ms", c.P99Ms, p.P99Ms, ratio(c.P99Ms, p.P99Ms))
	for _, cq := range c.Polls {
		fmt.Fprintf(w, "cmlab poll at end of %d lines (%d bytes): median %.1f µs, p99 %.1f µs\n", cq.Lines, cq.Bytes, cq.MedianUs, cq.P99Us)
	}
	for _, q := range p.Polls {
		for _, cq := range c.Polls {
			if cq.Size == q.Size {
				fmt.Fprintf(w, "%-28s %14.1f %14.1f %10s\n", fmt.Sprintf("poll @%d lines median µs", q.Size), cq.MedianUs, q.MedianUs, ratio(cq.MedianUs, q.MedianUs))
				if cq.Lines != q.Lines {
					fmt.Fprintf(w, "  (stores of %d and %d lines when polled)\n", cq.Lines, q.Lines)
				}
			}
		}
	}
	fmt.Fprintln(w, "acknowledged after fsync: cmlab yes; peer: not observable over HTTP (content-machine at 97ddffe3: no — its feedback store appends with fs.writeFile flag 'a' and never fsyncs)")
	fmt.Fprintln(w, "both sides: same client, same sequence, every poll over HTTP; polls of sizes up to --requests come before the timed POSTs, larger ones after")
}

package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/cmlab/cmlab/bench"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
)

type benchRebuildOpts struct {
	events     int
	seed       uint64
	keep       bool
	cpuProfile string
}

// newBenchRebuildCmd builds 'cmlab-bench rebuild': generate a log of mixed
// Lab events (without fsync, for setup speed) in a temporary home, then
// time a rebuild of every view from it.
func newBenchRebuildCmd(g *globalOpts) *cobra.Command {
	o := &benchRebuildOpts{}
	c := &cobra.Command{
		Use:   "rebuild",
		Short: "Events per second for rebuilding the views from a log of mixed Lab events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchRebuild(cmd.Context(), g, o)
		},
	}
	c.Flags().IntVar(&o.events, "events", 1_000_000, "events in the generated log")
	c.Flags().Uint64Var(&o.seed, "seed", 1, "workload seed")
	c.Flags().BoolVar(&o.keep, "keep", false, "keep the temporary home and print its path")
	c.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the rebuild (not the log generation) to this file")
	return c
}

type benchRebuildResult struct {
	Events        int     `json:"events"`
	LogBytes      int64   `json:"logBytes"`
	ViewBytes     int64   `json:"viewBytes"`
	SetupSeconds  float64 `json:"setupSeconds"`
	Seconds       float64 `json:"seconds"`
	EventsPerSec  float64 `json:"eventsPerSec"`
	MBPerSecViews float64 `json:"viewMBPerSec"`
	// CPUSeconds is the process CPU time (user+system) of the rebuild: on a
	// machine shared with other work, wall time overstates the cost.
	CPUSeconds float64 `json:"cpuSeconds"`
}

func runBenchRebuild(ctx context.Context, g *globalOpts, o *benchRebuildOpts) error {
	if o.events <= 0 {
		return &usageError{msg: "--events must be positive"}
	}
	tmp, err := os.MkdirTemp("", "cmlab-bench-rebuild-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(g.stderr, "bench rebuild: home kept in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	src := home.Home{Dir: tmp + "/src"}
	dst := home.Home{Dir: tmp + "/dst"}
	if err := src.Ensure(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := writeBenchLog(ctx, src, projections.Workload(projections.WorkloadMixedLab, o.seed, o.events), nil); err != nil {
		return err
	}
	setup := time.Since(t0)
	r, err := wal.OpenReader(src.WALDir())
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "bench rebuild: generated %d events in %.1fs; rebuilding…\n", o.events, setup.Seconds())
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpu0 := bench.ProcessCPU()
	t1 := time.Now()
	res, err := projections.Rebuild(ctx, r.Events(1), dst, projections.RebuildOptions{NoSync: true})
	d := time.Since(t1)
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	cpu := bench.ProcessCPU() - cpu0
	out := benchRebuildResult{Events: res.Events, SetupSeconds: setup.Seconds(), Seconds: d.Seconds(), CPUSeconds: cpu.Seconds()}
	out.LogBytes = dirSize(src.WALDir())
	views, _ := projections.ViewFiles(dst)
	for _, v := range views {
		if fi, err := os.Stat(dst.Dir + "/" + v); err == nil {
			out.ViewBytes += fi.Size()
		}
	}
	out.EventsPerSec = float64(res.Events) / d.Seconds()
	out.MBPerSecViews = float64(out.ViewBytes) / (1 << 20) / d.Seconds()
	return printResult(g, out, printBenchRebuild)
}

func printBenchRebuild(w io.Writer, r benchRebuildResult) {
	fmt.Fprintf(w, "rebuild: %d events in %.2fs = %.0f events/s (log %.1f MiB, views %.1f MiB, %.1f MiB/s written; %.2f CPU-seconds on %d cores)\n",
		r.Events, r.Seconds, r.EventsPerSec, float64(r.LogBytes)/(1<<20), float64(r.ViewBytes)/(1<<20), r.MBPerSecViews, r.CPUSeconds, runtime.GOMAXPROCS(0))
}

// writeBenchLog appends evs to h's log without fsync (setup speed: the
// benchmarks generate homes, they do not measure this), in batches of
// benchLogBatch events, calling progress (when set) after each batch with
// the number of events written so far.
func writeBenchLog(ctx context.Context, h home.Home, evs iter.Seq[*events.Event], progress func(n int)) error {
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir(), NoSync: true})
	if err != nil {
		return err
	}
	batch := make([]*events.Event, 0, benchLogBatch)
	n := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := l.Append(ctx, batch...); err != nil {
			return err
		}
		n += len(batch)
		batch = batch[:0]
		if progress != nil {
			progress(n)
		}
		return nil
	}
	for ev := range evs {
		batch = append(batch, ev)
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				l.Close()
				return err
			}
		}
	}
	if err := flush(); err != nil {
		l.Close()
		return err
	}
	return l.Close()
}

// benchLogBatch is how many events writeBenchLog appends at once.
const benchLogBatch = 4096

func dirSize(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
	twal "github.com/tidwall/wal"
)

type benchWalOpts struct {
	n         int
	appenders []int
	size      int
	batch     int
	baselineN int
	dir       string
	keep      bool
	repeat    int
	segSize   int
}

// benchWalRow is one line of the result table.
type benchWalRow struct {
	Name      string  `json:"name"`
	Appenders int     `json:"appenders,omitempty"`
	Events    int     `json:"events"`
	Seconds   float64 `json:"seconds"`
	PerSec    float64 `json:"events_per_sec"`
	P50Ms     float64 `json:"p50_ack_ms,omitempty"`
	P99Ms     float64 `json:"p99_ack_ms,omitempty"`
	AvgGroup  float64 `json:"avg_group,omitempty"`
	// FsyncP50Ms and FsyncP99Ms are the median and 99th percentile of
	// this run's group fsyncs (from Log.Stats). Every acknowledgement
	// waits for a whole group fsync, so the p99 acknowledgement cannot be
	// much below FsyncP99Ms: FsyncP99Ms/FsyncP50Ms is a floor under
	// P99OverFsync that no code above the disk can lower.
	FsyncP50Ms float64 `json:"fsync_p50_ms,omitempty"`
	FsyncP99Ms float64 `json:"fsync_p99_ms,omitempty"`
	// CeilingPerSec is raw tidwall WriteBatch (one fsync per batch) at the
	// batch size this run formed; the ratios compare against it and against
	// the per-entry-fsync baseline of the same run.
	CeilingPerSec float64 `json:"ceiling_events_per_sec,omitempty"`
	OfCeiling     float64 `json:"of_ceiling,omitempty"`
	XPerEntry     float64 `json:"x_per_entry_baseline,omitempty"`
	// P99OverFsync is p99 ack latency over this run's median group fsync.
	P99OverFsync float64 `json:"p99_over_median_fsync,omitempty"`
	// P99OverBaseFsync is p99 ack latency over the median fsync of the
	// per-entry baseline (tidwall Write + fsync of one entry).
	P99OverBaseFsync float64 `json:"p99_over_baseline_fsync,omitempty"`
	// MeanAckMs is the mean acknowledgement latency Little's law gives
	// for this many appenders in flight at this rate (appenders / rate):
	// a floor under the percentiles.
	MeanAckMs float64 `json:"mean_ack_ms,omitempty"`
	// P99OverFsyncP99 is p99 ack latency over this run's own p99 group
	// fsync: the tail target (≤ 2 at 64 appenders, issue 19).
	P99OverFsyncP99 float64 `json:"p99_over_p99_fsync,omitempty"`
	// Stages decomposes the run's acknowledgement latencies
	// (wal.Options.AckTrace): where the median and the tail went.
	Stages []benchStage `json:"stages,omitempty"`
}

// benchStage is one stage of the acknowledgement latency over a run: its
// median and 99th percentile over all acks, and its mean over the slowest
// 1% of acks (those at or above the p99 ack), whose stage means add up to
// their mean latency.
type benchStage struct {
	Name     string  `json:"name"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	TailMean float64 `json:"tail_mean_ms"`
}

// benchSyncProbe compares the two ways of making a group durable.
type benchSyncProbe struct {
	ChunkBytes int     `json:"chunk_bytes"`
	N          int     `json:"n"`
	AppendP50  float64 `json:"append_fsync_p50_ms"`
	AppendP99  float64 `json:"append_fsync_p99_ms"`
	ZerosP50   float64 `json:"zeros_fdatasync_p50_ms"`
	ZerosP99   float64 `json:"zeros_fdatasync_p99_ms"`
}

// benchStallProbe times raw tidwall WriteBatch calls without fsync into
// segments of the log's default size: the pauses that buffer growth
// alone puts in front of every group (a floor under cmlab's ack latency).
type benchStallProbe struct {
	Batch       int     `json:"batch"`
	Calls       int     `json:"calls"`
	SegmentSize int     `json:"segment_size"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	// Over1Ms is how many calls took longer than 1 ms.
	Over1Ms int `json:"over_1ms"`
	// StalledShare is the share of the probe's time spent in calls over 1 ms.
	StalledShare float64 `json:"stalled_share"`
	// Presized is the same probe with tidwall's tail buffers sized ahead,
	// as cmlab's log does.
	Presized *benchStallProbe `json:"presized,omitempty"`
}

type benchWalResult struct {
	EntryBytes     int              `json:"entry_bytes"`
	MedianFsyncMs  float64          `json:"median_fsync_ms"`
	SyncProbe      *benchSyncProbe  `json:"sync_probe,omitempty"`
	StallProbe     *benchStallProbe `json:"stall_probe,omitempty"`
	PerEntryPerSec float64          `json:"per_entry_fsync_events_per_sec"`
	Rows           []benchWalRow    `json:"rows"`
	Dir            string           `json:"dir"`
	Repeat         int              `json:"repeat"`
}

// newBenchWalCmd builds 'cmlab-bench wal'.
func newBenchWalCmd(g *globalOpts) *cobra.Command {
	o := &benchWalOpts{}
	var appenders string
	c := &cobra.Command{
		Use:   "wal",
		Short: "Group-commit throughput and ack latency of the log against raw tidwall/wal baselines",
		Long: `Appends N events of about --size bytes through cmlab's log with 1, 8 and 64
concurrent appenders, and one caller appending --batch events at a time; in
the same run it measures two tidwall/wal baselines: Write with an fsync per
entry, and raw WriteBatch with one fsync per batch at the batch sizes the
committer formed (the ceiling), right after each run, and a short
per-entry baseline right before it (the × per-entry ratio). Each configuration
runs --repeat times and the run with the median ratio to its ceiling is
reported. p99/fsync divides the p99 acknowledgement latency by the run's
own median group fsync; below the table, the spread of those fsyncs
themselves (their p99 over their median) shows how low that ratio can go
on this disk, since every acknowledgement waits for a whole fsync.
--segment-size sets the log's segment size for cmlab's runs and the stall
probe (smaller segments: shorter pauses while tidwall/wal grows its
in-memory tail, more segment files). Everything is fsynced for real, in a
new directory made inside --dir (default: the system's temporary
directory) and removed afterwards unless --keep.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range strings.Split(appenders, ",") {
				k, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || k < 1 {
					return &usageError{msg: fmt.Sprintf("bad --appenders %q", appenders)}
				}
				o.appenders = append(o.appenders, k)
			}
			if o.n < 1 || o.size < 64 || o.batch < 1 || o.repeat < 1 || o.baselineN < 1 {
				return &usageError{msg: "--n ≥ 1, --size ≥ 64, --batch ≥ 1, --repeat ≥ 1 and --baseline-n ≥ 1 are required"}
			}
			for _, k := range o.appenders {
				if k > o.n {
					return &usageError{msg: fmt.Sprintf("--n %d is fewer events than --appenders %d: every appender needs at least one", o.n, k)}
				}
			}
			if o.segSize < minBenchSegment {
				return &usageError{msg: fmt.Sprintf("--segment-size must be at least %d bytes", minBenchSegment)}
			}
			res, err := runBenchWal(cmd.Context(), o, g.stderr)
			if err != nil {
				return err
			}
			return printResult(g, res, printBenchWal)
		},
	}
	c.Flags().IntVar(&o.n, "n", 100000, "events per run")
	c.Flags().StringVar(&appenders, "appenders", "1,8,64", "concurrent appender counts")
	c.Flags().IntVar(&o.size, "size", 200, "entry size in bytes (approximate)")
	c.Flags().IntVar(&o.batch, "batch", 256, "events per Append in the single-caller batch run")
	c.Flags().IntVar(&o.baselineN, "baseline-n", 2000, "events of the per-entry-fsync baseline")
	c.Flags().StringVar(&o.dir, "dir", "", "where to make the run's directory of logs (default: the system's temporary directory)")
	c.Flags().BoolVar(&o.keep, "keep", false, "keep the logs (the directory is printed in --json output)")
	c.Flags().IntVar(&o.repeat, "repeat", 3, "runs per configuration; the median is reported")
	c.Flags().IntVar(&o.segSize, "segment-size", wal.DefaultSegmentSize, "segment size in bytes of the log under test (and of the stall probe)")
	return c
}

// benchEvents builds n events whose entries are about size bytes.
func benchEvents(n, size int) ([]*events.Event, int) {
	mk := func(i, pad int) *events.Event {
		return events.MustNew("bench", &events.WalSalvaged{LostSeq: uint64(i), Segment: "bench", Reason: strings.Repeat("p", pad)})
	}
	probe, _ := wal.EncodeEntry(mk(1<<40, 0))
	pad := size - len(probe)
	if pad < 0 {
		pad = 0
	}
	evs := make([]*events.Event, n)
	for i := range evs {
		evs[i] = mk(1<<40+i, pad) // fixed-width payload numbers keep sizes equal
	}
	b, _ := wal.EncodeEntry(evs[0])
	return evs, len(b)
}

func runBenchWal(ctx context.Context, o *benchWalOpts, progress io.Writer) (*benchWalResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	// A fresh directory for every invocation, also inside --dir: a log
	// left there by an earlier run must not be appended to.
	root, err := os.MkdirTemp(o.dir, "cmlab-bench-wal-")
	if err != nil {
		return nil, fmt.Errorf("--dir: %w", err)
	}
	if !o.keep {
		defer os.RemoveAll(root)
	}
	run := 0
	newDir := func() string {
		run++
		return filepath.Join(root, fmt.Sprintf("run%d", run))
	}
	_, entrySize := benchEvents(1, o.size)
	res := &benchWalResult{EntryBytes: entrySize, Dir: root, Repeat: o.repeat}
	raw := make([]byte, entrySize)
	rand.Read(raw)

	// Baseline: tidwall Write, fsync per entry; the median of the repeats.
	var base []benchWalRow
	for rep := 0; rep < o.repeat; rep++ {
		fmt.Fprintf(progress, "baseline: tidwall Write + fsync per entry, %d events (%d/%d)\n", o.baselineN, rep+1, o.repeat)
		lat, secs, err := rawWrite(newDir(), raw, o.baselineN)
		if err != nil {
			return nil, err
		}
		base = append(base, benchWalRow{Name: "tidwall Write, fsync/entry", Appenders: 1, Events: o.baselineN, Seconds: secs,
			PerSec: float64(o.baselineN) / secs, P50Ms: ms(percentile(lat, .5)), P99Ms: ms(percentile(lat, .99))})
	}
	sort.Slice(base, func(i, j int) bool { return base[i].PerSec < base[j].PerSec })
	b := base[len(base)/2]
	res.PerEntryPerSec, res.MedianFsyncMs = b.PerSec, b.P50Ms
	res.Rows = append(res.Rows, b)

	// Each configuration runs o.repeat times; each run is followed at once
	// by its ceiling (raw WriteBatch at the group size it formed), so that
	// both see the same machine; the run with the median ratio is reported.
	measure := func(name string, k, batch int) error {
		var rows []benchWalRow
		for rep := 0; rep < o.repeat; rep++ {
			fmt.Fprintf(progress, "%s: %d appenders, %d events per Append, %d events (%d/%d)\n", name, k, batch, o.n, rep+1, o.repeat)
			// A short per-entry baseline right before the run, so that the
			// × per-entry ratio compares runs that saw the same machine.
			_, bsecs, err := rawWrite(newDir(), raw, max(1, o.baselineN/4))
			if err != nil {
				return err
			}
			perEntry := float64(max(1, o.baselineN/4)) / bsecs
			row, err := benchAppenders(ctx, newDir(), o.n, o.size, k, batch, o.segSize)
			if err != nil {
				return err
			}
			g := int(math.Max(1, math.Round(row.AvgGroup)))
			secs, err := rawWriteBatch(newDir(), raw, o.n, g)
			if err != nil {
				return err
			}
			row.Name = name
			row.CeilingPerSec = float64(o.n) / secs
			row.OfCeiling = row.PerSec / row.CeilingPerSec
			row.XPerEntry = row.PerSec / perEntry
			if row.FsyncP50Ms > 0 {
				row.P99OverFsync = row.P99Ms / row.FsyncP50Ms
			}
			if res.MedianFsyncMs > 0 {
				row.P99OverBaseFsync = row.P99Ms / res.MedianFsyncMs
			}
			row.MeanAckMs = 1000 * float64(k) / row.PerSec
			rows = append(rows, row)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].OfCeiling < rows[j].OfCeiling })
		res.Rows = append(res.Rows, rows[len(rows)/2])
		return nil
	}
	// Why the log preallocates: fsync after an append vs fdatasync over
	// zeros, for a group of 32 entries.
	{
		chunk := 32 * entrySize
		fmt.Fprintf(progress, "sync probe: %d writes of %d bytes, fsync after append vs fdatasync over zeros\n", o.baselineN, chunk)
		d := newDir()
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		app, zer, err := wal.ProbeSync(d, o.baselineN, chunk)
		if err != nil {
			return nil, err
		}
		res.SyncProbe = &benchSyncProbe{ChunkBytes: chunk, N: o.baselineN,
			AppendP50: ms(percentile(app, .5)), AppendP99: ms(percentile(app, .99)),
			ZerosP50: ms(percentile(zer, .5)), ZerosP99: ms(percentile(zer, .99))}
	}
	// What tidwall's in-memory tail buffer costs on its own.
	{
		fmt.Fprintf(progress, "stall probe: raw tidwall WriteBatch of 32 entries, no fsync, %d events\n", o.n)
		sp, err := stallProbe(newDir(), raw, o.n, 32, o.segSize, false)
		if err != nil {
			return nil, err
		}
		if sp.Presized, err = stallProbe(newDir(), raw, o.n, 32, o.segSize, true); err != nil {
			return nil, err
		}
		res.StallProbe = sp
	}
	for _, k := range o.appenders {
		if err := measure("cmlab Append", k, 1); err != nil {
			return nil, err
		}
	}
	if err := measure(fmt.Sprintf("cmlab Append(%d events)", o.batch), 1, o.batch); err != nil {
		return nil, err
	}
	return res, nil
}

// benchAppenders appends n events with k goroutines, each appending batch
// events per call; it returns the row and the average group size.
func benchAppenders(ctx context.Context, dir string, n, size, k, batch, segSize int) (benchWalRow, error) {
	evs, _ := benchEvents(n, size)
	traces := make([]wal.AckTiming, n)
	var ntrace atomic.Int64
	l, err := wal.Open(wal.Options{Dir: dir, QuarantineDir: filepath.Join(dir, "quarantine"), SegmentSize: segSize,
		AckTrace: func(a wal.AckTiming) {
			if i := ntrace.Add(1) - 1; i < int64(len(traces)) {
				traces[i] = a
			}
		}})
	if err != nil {
		return benchWalRow{}, err
	}
	defer l.Close()
	per := n / k
	lats := make([][]time.Duration, k)
	errs := make(chan error, k)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < k; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := evs[w*per : (w+1)*per]
			for i := 0; i < len(mine); i += batch {
				j := min(i+batch, len(mine))
				t0 := time.Now()
				if _, err := l.Append(ctx, mine[i:j]...); err != nil {
					errs <- err
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return benchWalRow{}, err
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	st := l.Stats()
	groups := 0.0
	if st.Groups > 0 {
		groups = float64(st.Appends) / float64(st.Groups)
	}
	done := per * k
	row := benchWalRow{
		Name: "cmlab Append", Appenders: k, Events: done, Seconds: secs, PerSec: float64(done) / secs,
		P50Ms: ms(percentile(all, .5)), P99Ms: ms(percentile(all, .99)), AvgGroup: groups,
		FsyncP50Ms: st.FsyncP50Seconds * 1000, FsyncP99Ms: st.FsyncP99Seconds * 1000,
		Stages: ackStages(traces[:min(int(ntrace.Load()), len(traces))]),
	}
	if row.FsyncP99Ms > 0 {
		row.P99OverFsyncP99 = row.P99Ms / row.FsyncP99Ms
	}
	return row, nil
}

// ackStages summarises the decomposition of every acknowledgement of a run.
func ackStages(ts []wal.AckTiming) []benchStage {
	if len(ts) == 0 {
		return nil
	}
	totals := make([]time.Duration, len(ts))
	for i, a := range ts {
		totals[i] = a.Total
	}
	cut := percentile(totals, .99)
	stages := []struct {
		name string
		of   func(wal.AckTiming) time.Duration
	}{
		{"encode", func(a wal.AckTiming) time.Duration { return a.Encode }},
		{"wait for group", func(a wal.AckTiming) time.Duration { return a.WaitGroup }},
		{"seal", func(a wal.AckTiming) time.Duration { return a.Seal }},
		{"write", func(a wal.AckTiming) time.Duration { return a.Write }},
		{"wait for fsync", func(a wal.AckTiming) time.Duration { return a.WaitSync }},
		{"fsync", func(a wal.AckTiming) time.Duration { return a.Fsync }},
		{"apply+answer", func(a wal.AckTiming) time.Duration { return a.Apply }},
		{"wake-up", func(a wal.AckTiming) time.Duration { return a.WakeUp }},
		{"total", func(a wal.AckTiming) time.Duration { return a.Total }},
	}
	out := make([]benchStage, 0, len(stages))
	ds := make([]time.Duration, len(ts))
	for _, s := range stages {
		var tail time.Duration
		nt := 0
		for i, a := range ts {
			ds[i] = s.of(a)
			if a.Total >= cut {
				tail += ds[i]
				nt++
			}
		}
		out = append(out, benchStage{Name: s.name, P50Ms: ms(percentile(ds, .5)), P99Ms: ms(percentile(ds, .99)),
			TailMean: ms(tail) / float64(max(1, nt))})
	}
	return out
}

func rawWrite(dir string, entry []byte, n int) ([]time.Duration, float64, error) {
	tw, err := twal.Open(dir, &twal.Options{NoSync: false})
	if err != nil {
		return nil, 0, err
	}
	defer tw.Close()
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 1; i <= n; i++ {
		t0 := time.Now()
		if err := tw.Write(uint64(i), entry); err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, time.Since(start).Seconds(), nil
}

func rawWriteBatch(dir string, entry []byte, n, batch int) (float64, error) {
	_, secs, err := writeBatches(dir, &twal.Options{NoSync: false}, entry, n, batch)
	return secs, err
}

// writeBatches writes n copies of entry through raw tidwall WriteBatch
// calls of batch entries into a new log in dir; it returns each call's
// duration and the seconds the whole run took.
func writeBatches(dir string, opts *twal.Options, entry []byte, n, batch int) ([]time.Duration, float64, error) {
	tw, err := twal.Open(dir, opts)
	if err != nil {
		return nil, 0, err
	}
	defer tw.Close()
	var b twal.Batch
	lat := make([]time.Duration, 0, n/batch+1)
	start := time.Now()
	for i := 1; i <= n; {
		b.Clear()
		for j := 0; j < batch && i <= n; j++ {
			b.Write(uint64(i), entry)
			i++
		}
		t0 := time.Now()
		if err := tw.WriteBatch(&b); err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, time.Since(start).Seconds(), nil
}

func stallProbe(dir string, entry []byte, n, batch, segSize int, presize bool) (*benchStallProbe, error) {
	lat, err := wal.ProbeWriteBatch(dir, entry, n, batch, segSize, presize)
	if err != nil {
		return nil, err
	}
	p := &benchStallProbe{Batch: batch, Calls: len(lat), SegmentSize: segSize,
		P50Ms: ms(percentile(lat, .5)), P99Ms: ms(percentile(lat, .99)), MaxMs: ms(percentile(lat, 1))}
	var total, stalled time.Duration
	for _, d := range lat {
		total += d
		if d > time.Millisecond {
			p.Over1Ms++
			stalled += d
		}
	}
	if total > 0 {
		p.StalledShare = float64(stalled) / float64(total)
	}
	return p, nil
}

// minBenchSegment is the smallest --segment-size: below it a run of
// 100,000 events would make thousands of segment files.
const minBenchSegment = 64 << 10

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func printBenchWal(w io.Writer, res *benchWalResult) {
	fmt.Fprintf(w, "entries of %d bytes; median of %d runs per row; per-entry baseline p50 %.3f ms\n", res.EntryBytes, res.Repeat, res.MedianFsyncMs)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tappenders\tevents/s\tp50 ms\tp99 ms\tavg group\tfsync p50 ms\tfsync p99 ms\tp99/fsync p99\tceiling/s\tof ceiling\t× per-entry\tp99/fsync\tp99/base fsync\t")
	for _, r := range res.Rows {
		if r.CeilingPerSec == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3f\t%.3f\t\t\t\t\t\t\t\t\t\t\n", r.Name, r.Appenders, r.PerSec, r.P50Ms, r.P99Ms)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3f\t%.3f\t%.1f\t%.3f\t%.3f\t%.2f\t%.0f\t%.0f%%\t%.1f×\t%.1f\t%.1f\t\n", r.Name, r.Appenders, r.PerSec, r.P50Ms, r.P99Ms, r.AvgGroup, r.FsyncP50Ms, r.FsyncP99Ms, r.P99OverFsyncP99, r.CeilingPerSec, 100*r.OfCeiling, r.XPerEntry, r.P99OverFsync, r.P99OverBaseFsync)
	}
	tw.Flush()
	for _, r := range res.Rows {
		if r.Appenders > 1 && r.MeanAckMs > 0 && res.MedianFsyncMs > 0 {
			fmt.Fprintf(w, "%d appenders in flight at %.0f/s: mean ack %.3f ms by Little's law, %.1f× the baseline's fsync median\n",
				r.Appenders, r.PerSec, r.MeanAckMs, r.MeanAckMs/res.MedianFsyncMs)
		}
		if r.Appenders > 1 && r.FsyncP50Ms > 0 {
			fmt.Fprintf(w, "%d appenders: the run's group fsyncs p50 %.3f ms p99 %.3f ms, p99 %.1f× their median (every ack waits for one whole: p99/fsync cannot go much below this)\n",
				r.Appenders, r.FsyncP50Ms, r.FsyncP99Ms, r.FsyncP99Ms/r.FsyncP50Ms)
		}
		if r.Appenders > 1 && len(r.Stages) > 0 {
			fmt.Fprintf(w, "%d appenders, ack latency by stage (ms): p50 / p99 over all acks; mean over the slowest 1%% (acks ≥ p99)\n", r.Appenders)
			for _, s := range r.Stages {
				fmt.Fprintf(w, "  %-15s %7.3f %7.3f   %7.3f\n", s.Name, s.P50Ms, s.P99Ms, s.TailMean)
			}
		}
	}
	if p := res.SyncProbe; p != nil {
		fmt.Fprintf(w, "sync probe, %d writes of %d bytes: fsync after an append p50 %.3f ms p99 %.3f ms; fdatasync over preallocated zeros p50 %.3f ms p99 %.3f ms\n",
			p.N, p.ChunkBytes, p.AppendP50, p.AppendP99, p.ZerosP50, p.ZerosP99)
	}
	if p := res.StallProbe; p != nil {
		fmt.Fprintf(w, "stall probe, %d raw tidwall WriteBatch calls of %d entries, no fsync, %d-byte segments: p50 %.3f ms p99 %.3f ms max %.3f ms; %d calls over 1 ms took %.0f%% of the time\n",
			p.Calls, p.Batch, p.SegmentSize, p.P50Ms, p.P99Ms, p.MaxMs, p.Over1Ms, 100*p.StalledShare)
		if q := p.Presized; q != nil {
			fmt.Fprintf(w, "  the same with tail buffers sized ahead (as the log does): p50 %.3f ms p99 %.3f ms max %.3f ms; %d calls over 1 ms took %.0f%% of the time\n",
				q.P50Ms, q.P99Ms, q.MaxMs, q.Over1Ms, 100*q.StalledShare)
		}
	}
}

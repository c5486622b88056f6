package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/spf13/cobra"
)

type benchStartOpts struct {
	events  string
	kinds   string
	dir     string
	keep    bool
	seed    uint64
	starts  int
	profile string
	cmlab   string        // the cmlab binary measured
	window  time.Duration // RSS watched after ready (peak, settled)
	rebuild bool          // time `cmlab rebuild` against the first start
}

// Home kinds of bench start.
const (
	benchKindFeedback = "feedback"
	benchKindMixed    = "mixed"
	benchKindTerminal = "terminal"
)

// newBenchStartCmd builds 'cmlab-bench start': the daemon's start cost and
// `cmlab status`'s as the history grows.
func newBenchStartCmd(g *globalOpts) *cobra.Command {
	o := &benchStartOpts{}
	c := &cobra.Command{
		Use:   "start",
		Short: "Daemon ready time, RSS and `cmlab status` time on homes of growing history",
		Long: `For each size and home kind, generate a home (its log written without
fsync), start 'cmlab serve' on it once to build its views, index and
snapshots, stop it, then measure: the daemon's ready time (process start →
GET /api/health answers), its VmRSS and VmHWM (/proc/PID/status) when ready,
the peak and settled RSS over the --window after ready (sampled every
250 ms; settled is the last sample: what the daemon keeps while it runs),
and the time of a 'cmlab status' process with no daemon running. Each is the
median of --starts runs; ratios are to the smallest size of the same kind.

With --rebuild (the default) the home's 'cmlab rebuild' is timed first,
then everything but the log is removed and the first start (views, request
index, Lab store and snapshots built from the whole log, as after an
upgrade) is timed to ready: the issue 26 target is first start ≤ 1.2×
rebuild.

Kinds: feedback (every event a POST /api/feedback with a request id), mixed
(the 'bench rebuild' Lab mix), terminal (blocks of terminal output in four
conversations).

--profile DIR writes, per home, the CPU profile of one serve start (process
start → ready) and its heap profile at ready (serve-<kind>-<size>.cpu|heap).`,
		Example: `  cmlab-bench start --events 100000,1000000,10000000
  cmlab-bench start --events 1000000 --kinds feedback --profile /tmp/prof --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchStart(cmd.Context(), g, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.events, "events", "100000,1000000", "comma-separated event counts, one home per count and kind")
	f.StringVar(&o.kinds, "kinds", "feedback,mixed,terminal", "home kinds: feedback, mixed, terminal")
	f.StringVar(&o.dir, "dir", "", "where the homes are made (default: a temporary directory, removed at the end)")
	f.BoolVar(&o.keep, "keep", false, "keep the homes (each is otherwise removed once measured)")
	f.Uint64Var(&o.seed, "seed", 1, "workload seed")
	f.IntVar(&o.starts, "starts", 3, "daemon starts (and status runs) per home; the median is reported")
	f.StringVar(&o.profile, "profile", "", "write CPU and heap profiles of one serve start per home into this directory")
	f.StringVar(&o.cmlab, "cmlab", "", "the cmlab binary to measure (default: cmlab beside this binary, else on $PATH)")
	f.DurationVar(&o.window, "window", 30*time.Second, "how long RSS is watched after ready for its peak and settled value (e.g. 5s for a quick run)")
	f.BoolVar(&o.rebuild, "rebuild", true, "time `cmlab rebuild` of each home and compare the first start with it")
	return c
}

// benchStartRow is one home's figures.
type benchStartRow struct {
	Kind      string  `json:"kind"`
	Events    int     `json:"events"`
	LogMiB    float64 `json:"logMiB"`
	ViewsMiB  float64 `json:"viewsMiB"`
	StateMiB  float64 `json:"stateMiB"`
	GenSecs   float64 `json:"generateSeconds"`
	PrimeSecs float64 `json:"firstStartSeconds"`
	ReadyMs   float64 `json:"readyMs"`
	// ReadyCPUMs is the serve process's CPU time (user+system) at ready:
	// less sensitive than ReadyMs to other work on the machine.
	ReadyCPUMs float64 `json:"readyCpuMs"`
	RSSMiB     float64 `json:"rssMiB"`
	// AnonMiB is RssAnon: the heap and stacks, without the mapped files
	// (bbolt's mmap of state/reqindex.db, the binary) that RSS counts.
	AnonMiB float64 `json:"rssAnonMiB"`
	HWMMiB  float64 `json:"hwmMiB"`
	// PeakMiB and SettledMiB: the largest RSS seen over the window after
	// ready, and the RSS at its end.
	PeakMiB    float64 `json:"peakRssMiB"`
	SettledMiB float64 `json:"settledRssMiB"`
	WindowSecs float64 `json:"windowSeconds"`
	// RebuildSecs is `cmlab rebuild` of the log; FirstReadyMs the ready
	// time of the first start after everything but the log was removed.
	RebuildSecs  float64 `json:"rebuildSeconds,omitempty"`
	FirstReadyMs float64 `json:"firstReadyMs"`
	FirstRatio   float64 `json:"firstStartToRebuild,omitempty"`
	// The same in CPU time (user+system): the rebuild process's whole,
	// the first start's at ready. Less sensitive to a loaded machine.
	RebuildCPUSecs float64 `json:"rebuildCpuSeconds,omitempty"`
	FirstCPUSecs   float64 `json:"firstCpuSeconds"`
	FirstCPURatio  float64 `json:"firstStartToRebuildCpu,omitempty"`
	StatusMs       float64 `json:"statusMs"`
	// StatusExit is the exit code of `cmlab status` (4 when steps await
	// review; the time counts either way).
	StatusExit  int     `json:"statusExit"`
	ReadyRatio  float64 `json:"readyRatio"`
	RSSRatio    float64 `json:"rssRatio"`
	StatusRatio float64 `json:"statusRatio"`
}

func parseEventCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "_", ""))
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, &usageError{msg: fmt.Sprintf("--events: %q is not a positive count", f)}
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, &usageError{msg: "--events: no count given"}
	}
	slices.Sort(out)
	return out, nil
}

func runBenchStart(ctx context.Context, g *globalOpts, o *benchStartOpts) error {
	sizes, err := parseEventCounts(o.events)
	if err != nil {
		return err
	}
	var kinds []string
	for _, k := range strings.Split(o.kinds, ",") {
		switch k = strings.TrimSpace(k); k {
		case benchKindFeedback, benchKindMixed, benchKindTerminal:
			kinds = append(kinds, k)
		case "":
		default:
			return &usageError{msg: fmt.Sprintf("--kinds: unknown kind %q (feedback, mixed, terminal)", k)}
		}
	}
	if len(kinds) == 0 {
		return &usageError{msg: "--kinds: no kind given"}
	}
	if o.starts < 1 {
		return &usageError{msg: "--starts must be ≥ 1"}
	}
	exe, err := cmlabBinary(o.cmlab)
	if err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cmlab-bench-start-"); err != nil {
			return err
		}
		if !o.keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o700); err != nil {
			return err
		}
	}
	var rows []benchStartRow
	for _, kind := range kinds {
		var base *benchStartRow
		for _, n := range sizes {
			h := home.Home{Dir: filepath.Join(dir, fmt.Sprintf("%s-%d", kind, n))}
			if _, err := os.Stat(h.Dir); err == nil {
				return fmt.Errorf("bench start: %s exists; give an empty --dir", h.Dir)
			}
			row, err := benchStartHome(ctx, g, o, exe, h, kind, n)
			if !o.keep {
				os.RemoveAll(h.Dir)
			} else {
				fmt.Fprintln(g.stderr, "bench start: home kept in", h.Dir)
			}
			if err != nil {
				return fmt.Errorf("bench start: %s home of %d events: %w", kind, n, err)
			}
			if base == nil {
				base = &row
			}
			row.ReadyRatio = row.ReadyMs / base.ReadyMs
			row.RSSRatio = row.RSSMiB / base.RSSMiB
			row.StatusRatio = row.StatusMs / base.StatusMs
			rows = append(rows, row)
			if !g.json {
				printBenchStartRow(g.stderr, row)
			}
		}
	}
	return printResult(g, rows, printBenchStartTable)
}

// printBenchStartTable prints rows as a Markdown table.
func printBenchStartTable(w io.Writer, rows []benchStartRow) {
	fmt.Fprintln(w, "| home | events | log | ready (×) | CPU at ready | RSS at ready (×) | peak / settled RSS | first start / rebuild | `cmlab status` (×) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		first := "—"
		if r.RebuildSecs > 0 {
			first = fmt.Sprintf("%.2f s / %.2f s (%.2f×); CPU %.2f s / %.2f s (%.2f×)", r.FirstReadyMs/1000, r.RebuildSecs, r.FirstRatio,
				r.FirstCPUSecs, r.RebuildCPUSecs, r.FirstCPURatio)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f MiB | %.0f ms (%.2f×) | %.0f ms | %.0f MiB (%.2f×) | %.0f / %.0f MiB over %.0f s | %s | %.0f ms (%.2f×) |\n",
			r.Kind, benchCount(r.Events), r.LogMiB, r.ReadyMs, r.ReadyRatio, r.ReadyCPUMs, r.RSSMiB, r.RSSRatio, r.PeakMiB, r.SettledMiB, r.WindowSecs, first, r.StatusMs, r.StatusRatio)
	}
}

func printBenchStartRow(w io.Writer, r benchStartRow) {
	fmt.Fprintf(w, "bench start: %s %s: ready %.0f ms (CPU %.0f ms), RSS %.1f MiB (HWM %.1f, anon %.1f), over %.0f s peak %.1f settled %.1f MiB, status %.0f ms (exit %d); log %.0f MiB, views %.0f MiB, state %.1f MiB; generated in %.1fs, rebuild %.2fs (CPU %.2fs), first start ready in %.2fs (%.2f×; CPU %.2fs, %.2f×)\n",
		r.Kind, benchCount(r.Events), r.ReadyMs, r.ReadyCPUMs, r.RSSMiB, r.HWMMiB, r.AnonMiB, r.WindowSecs, r.PeakMiB, r.SettledMiB, r.StatusMs, r.StatusExit, r.LogMiB, r.ViewsMiB, r.StateMiB, r.GenSecs, r.RebuildSecs, r.RebuildCPUSecs, r.FirstReadyMs/1000, r.FirstRatio, r.FirstCPUSecs, r.FirstCPURatio)
}

// benchCount prints 100000 as 100k and 10000000 as 10M.
func benchCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// benchStartHome generates, primes and measures one home.
func benchStartHome(ctx context.Context, g *globalOpts, o *benchStartOpts, exe string, h home.Home, kind string, n int) (benchStartRow, error) {
	row := benchStartRow{Kind: kind, Events: n}
	if err := h.Ensure(); err != nil {
		return row, err
	}
	t0 := time.Now()
	step := max(n/10, benchLogBatch)
	next := step
	progress := func(done int) {
		if done >= next || done == n {
			fmt.Fprintf(g.stderr, "bench start: %s %s: %d/%d events written (%.0fs)\n", kind, benchCount(n), done, n, time.Since(t0).Seconds())
			for next <= done {
				next += step
			}
		}
	}
	if err := writeBenchLog(ctx, h, benchStartWorkload(kind, o.seed, n), progress); err != nil {
		return row, err
	}
	row.GenSecs = time.Since(t0).Seconds()
	if o.rebuild {
		// `cmlab rebuild` of the log (views, request index, Lab store,
		// snapshots), then everything but the log removed: the first start
		// below builds the same from the log.
		fmt.Fprintf(g.stderr, "bench start: %s %s: cmlab rebuild…\n", kind, benchCount(n))
		tr := time.Now()
		cmd := exec.CommandContext(ctx, exe, "rebuild", "--home", h.Dir)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &limitedWriter{w: &out, n: 64 << 10}, &limitedWriter{w: &out, n: 64 << 10}
		if err := cmd.Run(); err != nil {
			return row, fmt.Errorf("cmlab rebuild: %v: %s", err, out.String())
		}
		row.RebuildSecs = time.Since(tr).Seconds()
		row.RebuildCPUSecs = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
		if err := removeAllButLog(h); err != nil {
			return row, err
		}
	}
	// The first start builds the views, the request-id index and the
	// snapshots from the whole log, as after an upgrade; a daemon that has
	// run for months starts from what its last run left, which is what the
	// starts measured below find.
	fmt.Fprintf(g.stderr, "bench start: %s %s: first start (builds views, index, snapshots)…\n", kind, benchCount(n))
	t1 := time.Now()
	first, err := benchServeOnce(ctx, exe, h, "", 0)
	if err != nil {
		return row, fmt.Errorf("first start: %w", err)
	}
	row.PrimeSecs = time.Since(t1).Seconds()
	row.FirstReadyMs = first.ready.Seconds() * 1000
	row.FirstCPUSecs = first.cpu.Seconds()
	if row.RebuildSecs > 0 {
		row.FirstRatio = row.FirstReadyMs / 1000 / row.RebuildSecs
	}
	if row.RebuildCPUSecs > 0 {
		row.FirstCPURatio = row.FirstCPUSecs / row.RebuildCPUSecs
	}
	row.LogMiB = float64(dirSize(h.WALDir())) / (1 << 20)
	if views, err := projections.ViewFiles(h); err == nil {
		var b int64
		for _, v := range views {
			if fi, err := os.Stat(filepath.Join(h.Dir, filepath.FromSlash(v))); err == nil {
				b += fi.Size()
			}
		}
		row.ViewsMiB = float64(b) / (1 << 20)
	}
	row.StateMiB = float64(treeSize(filepath.Join(h.Dir, "state"))) / (1 << 20)
	if o.profile != "" {
		// A start of its own: profiling slows it, so it is not counted.
		prof := filepath.Join(o.profile, fmt.Sprintf("serve-%s-%s", kind, benchCount(n)))
		if _, err := benchServeOnce(ctx, exe, h, prof, 0); err != nil {
			return row, err
		}
	}
	var ready, cpu, rss, hwm, anon, peak, settled, status []float64
	for i := 0; i < o.starts; i++ {
		m, err := benchServeOnce(ctx, exe, h, "", o.window)
		if err != nil {
			return row, err
		}
		peak = append(peak, m.peak)
		settled = append(settled, m.settled)
		ready = append(ready, m.ready.Seconds()*1000)
		cpu = append(cpu, m.cpu.Seconds()*1000)
		rss = append(rss, m.rss)
		hwm = append(hwm, m.hwm)
		anon = append(anon, m.anon)
	}
	for i := 0; i < o.starts; i++ {
		d, code, err := benchStatusOnce(ctx, exe, h)
		if err != nil {
			return row, err
		}
		status = append(status, d.Seconds()*1000)
		row.StatusExit = code
	}
	row.ReadyMs, row.ReadyCPUMs, row.RSSMiB, row.HWMMiB, row.AnonMiB, row.StatusMs = median(ready), median(cpu), median(rss), median(hwm), median(anon), median(status)
	row.PeakMiB, row.SettledMiB, row.WindowSecs = median(peak), median(settled), o.window.Seconds()
	return row, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// benchServeMeasure is one daemon start's figures.
type benchServeMeasure struct {
	ready          time.Duration
	cpu            time.Duration // user+system CPU of the process at ready
	rss, hwm, anon float64       // MiB
	peak, settled  float64       // MiB: the largest RSS over the window after ready, the last
}

// benchServeOnce starts `cmlab serve` on h (127.0.0.1, port 0), waits until
// GET /api/health answers 200, reads its memory from /proc, watches its RSS
// for settle (peak and last sample), then stops it with SIGTERM and waits
// for it. prof, when set, is the
// path prefix of the start's CPU and heap profiles (the serve process
// writes them: CMLAB_START_PROFILE, see serve.go).
func benchServeOnce(ctx context.Context, exe string, h home.Home, prof string, settle time.Duration) (benchServeMeasure, error) {
	var m benchServeMeasure
	cmd := exec.CommandContext(ctx, exe, "serve", "--home", h.Dir, "--listen", "127.0.0.1:0", "--json", "--quiet")
	cmd.Env = os.Environ()
	if prof != "" {
		cmd.Env = append(cmd.Env, "CMLAB_START_PROFILE="+prof)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return m, err
	}
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return m, err
	}
	exited := make(chan error, 1)
	infoCh := make(chan labapi.DaemonInfo, 1)
	go func() {
		var info labapi.DaemonInfo
		if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&info); err == nil {
			infoCh <- info
		}
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	stop := func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(5 * time.Minute):
			cmd.Process.Kill()
			<-exited
			return errors.New("serve did not stop within 5 minutes of SIGTERM")
		}
	}
	var info labapi.DaemonInfo
	select {
	case info = <-infoCh:
	case err := <-exited:
		return m, fmt.Errorf("serve exited before ready (%v): %s", err, stderr.String())
	case <-ctx.Done():
		stop()
		return m, ctx.Err()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		resp, err := client.Get("http://" + info.Listen + "/api/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(t0) > 10*time.Minute {
			stop()
			return m, fmt.Errorf("serve not healthy after 10 minutes: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	m.ready = time.Since(t0)
	m.rss, m.hwm, m.anon = procMemMiB(cmd.Process.Pid)
	m.cpu = procCPU(cmd.Process.Pid)
	m.peak, m.settled = m.rss, m.rss
	for end := time.Now().Add(settle); time.Now().Before(end); {
		time.Sleep(min(250*time.Millisecond, time.Until(end)))
		r, _, _ := procMemMiB(cmd.Process.Pid)
		m.peak, m.settled = max(m.peak, r), r
	}
	if err := stop(); err != nil {
		return m, fmt.Errorf("serve: %v: %s", err, stderr.String())
	}
	return m, nil
}

// procCPU reads the user+system CPU time of pid from /proc/PID/stat
// (clock ticks of 10 ms, the USER_HZ of Linux on every architecture Go
// supports).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which may hold spaces, in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// procMemMiB reads VmRSS, VmHWM and RssAnon of pid from /proc, in MiB.
func procMemMiB(pid int) (rss, hwm, anon float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, _ := strconv.ParseFloat(f[0], 64)
		switch k {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			hwm = kb / 1024
		case "RssAnon":
			anon = kb / 1024
		}
	}
	return rss, hwm, anon
}

// benchStatusOnce times a `cmlab status` process on h (no daemon runs).
func benchStatusOnce(ctx context.Context, exe string, h home.Home) (time.Duration, int, error) {
	cmd := exec.CommandContext(ctx, exe, "status", "--home", h.Dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &limitedWriter{w: &out, n: 64 << 10}, &limitedWriter{w: &out, n: 64 << 10}
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return d, 0, nil
	case errors.As(err, &ee) && ee.ExitCode() == 4: // steps await review
		return d, ee.ExitCode(), nil
	default:
		return d, -1, fmt.Errorf("cmlab status: %v: %s", err, out.String())
	}
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// benchStartWorkload yields the n events of a home of the given kind.
func benchStartWorkload(kind string, seed uint64, n int) iter.Seq[*events.Event] {
	switch kind {
	case benchKindFeedback:
		return feedbackWorkload(seed, n)
	case benchKindTerminal:
		return terminalWorkload(n)
	default:
		return projections.Workload(projections.WorkloadMixedLab, seed, n)
	}
}

// feedbackWorkload: n feedback posts, as POST /api/feedback appends them
// (each with a request id and its response), in one Lab session.
func feedbackWorkload(seed uint64, n int) iter.Seq[*events.Event] {
	return func(yield func(*events.Event) bool) {
		const sess = "lab_bench"
		for i := 1; i <= n; i++ {
			over, hook := i%101, (i*7)%101
			e := events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%d_%d", seed, i), SessionID: sess,
				RunID:   fmt.Sprintf("run_%d", i%50),
				Ratings: &events.Ratings{Overall: &over, Hook: &hook},
				Notes:   []string{"", "good pacing", "captions drift late"}[i%3]}
			resp, _ := json.Marshal(map[string]string{"feedbackId": e.ID})
			ev := events.MustNew(sess, &events.FeedbackSubmitted{Entry: e}).
				WithRequest(fmt.Sprintf("req-%d-%d", seed, i), fmt.Sprintf("sha256-%064x", i), resp)
			if !yield(ev) {
				return
			}
		}
	}
}

// terminalWorkload: four conversations, each a shell that runs blocks of
// 200 lines of output (about 80 bytes each) ending at a prompt, in turn.
func terminalWorkload(n int) iter.Seq[*events.Event] {
	return func(yield func(*events.Event) bool) {
		convs := []string{"conv_a", "conv_b", "conv_c", "conv_d"}
		type convState struct {
			spool  int64
			blocks int
			lines  int // output lines of the open block; -1: none open
			cur    events.Block
		}
		st := make([]convState, len(convs))
		zero := 0
		i := 0
		emit := func(ev *events.Event) bool {
			i++
			return yield(ev)
		}
		for c, conv := range convs {
			if i >= n {
				return
			}
			st[c].lines = -1
			if !emit(events.MustNew(conv, &events.PtySessionStarted{ConversationID: conv, ShellID: "sh_" + conv, Pid: 1000 + c, Cols: 120, Rows: 40, Cwd: "/work"})) {
				return
			}
		}
		for c := 0; i < n; c = (c + 1) % len(convs) {
			conv, s := convs[c], &st[c]
			// A burst of events per conversation, as output arrives.
			for k := 0; k < 50 && i < n; k++ {
				var ev *events.Event
				switch {
				case s.lines < 0:
					s.blocks++
					s.cur = events.Block{BlockID: fmt.Sprintf("blk_%s_%d", conv, s.blocks), Seq: s.blocks, Mode: "block",
						ShellID: "sh_" + conv, Cmd: "go test ./...", Cwd: "/work", TsBegin: time.Now().UnixMilli(),
						Status: events.BlockRunning, SpoolBegin: s.spool}
					s.lines = 0
					ev = events.MustNew(conv, &events.PtyBlockBegin{Block: s.cur})
				case s.lines < 200:
					data := []byte(fmt.Sprintf("=== RUN   TestSomething/case_%06d\n--- PASS: TestSomething/case_%06d (0.00s)\n", s.lines, s.lines))
					ev = events.MustNew(conv, &events.PtyOutput{BlockID: s.cur.BlockID, SpoolOffset: s.spool, Data: data})
					s.spool += int64(len(data))
					s.lines++
				case s.lines == 200:
					b := s.cur
					b.TsEnd, b.Status, b.ExitCode, b.SpoolEnd = time.Now().UnixMilli(), events.BlockCompleted, &zero, s.spool
					ev = events.MustNew(conv, &events.PtyBlockEnd{Block: b})
					s.lines++
				default:
					line := fmt.Sprintf("__FWS_PROMPT__ ts=%d cwd_b64=L3dvcms= exit=0\n", time.Now().UnixMilli())
					ev = events.MustNew(conv, &events.PtyPrompt{PromptTS: time.Now().UnixMilli(), Cwd: "/work", ExitCode: &zero, SpoolOffset: s.spool, Line: line})
					s.spool += int64(len(line))
					s.lines = -1
				}
				if !emit(ev) {
					return
				}
			}
		}
	}
}

// cmlabBinary is the cmlab binary bench start measures: flag when set,
// else cmlab beside this executable, else cmlab on $PATH.
func cmlabBinary(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), "cmlab"); isExecutable(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("cmlab")
	if err != nil {
		return "", &usageError{msg: "no cmlab binary to measure beside cmlab-bench or on $PATH: build it (go build -o DIR/cmlab ./cmd/cmlab) and pass --cmlab DIR/cmlab"}
	}
	return p, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// removeAllButLog removes every file of h but its log (wal/): the home as
// after an upgrade that dropped the derived state.
func removeAllButLog(h home.Home) error {
	ents, err := os.ReadDir(h.Dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == "wal" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(h.Dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

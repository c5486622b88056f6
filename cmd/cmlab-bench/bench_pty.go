package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime/pprof"
	"sort"
	"strconv"
	"time"

	cpty "github.com/creack/pty"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/spf13/cobra"
)

type benchPtyOpts struct {
	bytes      int64
	n          int
	repeat     int
	keep       bool
	cpuprofile string
}

// benchPtyResult is what 'cmlab-bench pty' measures.
type benchPtyResult struct {
	Bytes          int64           `json:"bytes"`
	Command        string          `json:"command"`
	BlockSeconds   float64         `json:"block_seconds"`
	SpoolMBps      float64         `json:"spool_mb_per_sec"`
	OutsideSeconds float64         `json:"outside_seconds"`
	Slowdown       float64         `json:"slowdown"`
	PlainPtySecs   float64         `json:"plain_pty_seconds,omitempty"`
	BarePtySecs    float64         `json:"bare_pty_seconds"`
	BarePtyMBps    float64         `json:"bare_pty_mb_per_sec"`
	RatioToBare    float64         `json:"ratio_to_bare_pty"`
	Rounds         []benchPtyRound `json:"rounds"`
	OutputEvents   int             `json:"output_events"`
	Iterations     int             `json:"latency_iterations"`
	MarkP50Ms      float64         `json:"mark_to_wait_for_p50_ms"`
	MarkP99Ms      float64         `json:"mark_to_wait_for_p99_ms"`
	PromptP50Ms    float64         `json:"prompt_to_wait_prompt_p50_ms"`
	PromptP99Ms    float64         `json:"prompt_to_wait_prompt_p99_ms"`
	Home           string          `json:"home,omitempty"`
}

// benchPtyRound is one side-by-side pair: the block through cmlab and the
// same command through a bare pty, run back to back.
type benchPtyRound struct {
	BlockSeconds float64 `json:"block_seconds"`
	BareSeconds  float64 `json:"bare_pty_seconds"`
	Ratio        float64 `json:"ratio"`
}

// newBenchPtyCmd builds 'cmlab-bench pty': a large output through one block
// (spool throughput, wall time against the same command outside cmlab) and
// the latency from a mark printed by the shell to wait_for returning.
func newBenchPtyCmd(g *globalOpts) *cobra.Command {
	o := &benchPtyOpts{}
	c := &cobra.Command{
		Use:   "pty",
		Short: "Terminal throughput (N bytes through a block) and mark → wait_for latency",
		Long: `Runs in a fresh temporary home with fsync on (the daemon's settings):

  1. 'head -c N /dev/zero | tr '\0' a' as one block: wall time from exec_block
     to wait_prompt returning, spool MB/s; side by side, the same command
     under a bare pty (bash -c under github.com/creack/pty, the master read
     in 64 KiB reads and discarded: no log, no spool) and the ratio of the
     two throughputs (bare time / cmlab time; 1.0 = as fast as a bare pty).
     --repeat R runs R such pairs back to back (bare, then cmlab) and reports
     the median ratio; the machine's load moves both sides alike. Also the
     command outside any pty (to /dev/null) and through 'script -qc' when
     installed. The block has no output cap (pty.Options caps off).
  2. --n blocks 'echo "M$EPOCHREALTIME"': the time from the shell's
     timestamp to wait_for (regex) returning, and from the prompt sentinel's
     ts to wait_prompt returning; p50 and p99.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := benchPty(cmd.Context(), o)
			if err != nil {
				return err
			}
			return printResult(g, res, printBenchPty)
		},
	}
	c.Flags().Int64Var(&o.bytes, "bytes", 50_000_000, "bytes the block prints")
	c.Flags().IntVar(&o.n, "n", 200, "blocks for the latency measurement")
	c.Flags().IntVar(&o.repeat, "repeat", 1, "side-by-side pairs (bare pty, then cmlab) for the throughput ratio")
	c.Flags().BoolVar(&o.keep, "keep", false, "keep the temporary home")
	c.Flags().StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the cmlab blocks to FILE (go tool pprof)")
	return c
}

// printBenchPty prints the result of 'cmlab-bench pty' as text.
func printBenchPty(w io.Writer, res *benchPtyResult) {
	fmt.Fprintf(w, "block: %s\n", res.Command)
	fmt.Fprintf(w, "  through cmlab  %.2f s   spool %.1f MB/s   %d pty.output events\n", res.BlockSeconds, res.SpoolMBps, res.OutputEvents)
	fmt.Fprintf(w, "  bare pty       %.2f s   %.1f MB/s (creack/pty, read and discarded)\n", res.BarePtySecs, res.BarePtyMBps)
	fmt.Fprintf(w, "  cmlab / bare pty throughput: %.0f%%", res.RatioToBare*100)
	if len(res.Rounds) > 1 {
		fmt.Fprintf(w, " (median of %d side-by-side pairs:", len(res.Rounds))
		for _, r := range res.Rounds {
			fmt.Fprintf(w, " %.2f/%.2f s", r.BlockSeconds, r.BareSeconds)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  outside cmlab  %.2f s   (×%.1f) to /dev/null\n", res.OutsideSeconds, res.Slowdown)
	if res.PlainPtySecs > 0 {
		fmt.Fprintf(w, "  script -qc     %.2f s   (util-linux script, no log)\n", res.PlainPtySecs)
	}
	fmt.Fprintf(w, "latency over %d blocks:\n", res.Iterations)
	fmt.Fprintf(w, "  shell mark → wait_for      p50 %.2f ms  p99 %.2f ms\n", res.MarkP50Ms, res.MarkP99Ms)
	fmt.Fprintf(w, "  prompt sentinel → wait_prompt  p50 %.2f ms  p99 %.2f ms (sentinel ts has ms resolution)\n", res.PromptP50Ms, res.PromptP99Ms)
}

func benchPty(ctx context.Context, o *benchPtyOpts) (*benchPtyResult, error) {
	dir, err := os.MkdirTemp("", "cmlab-bench-pty-")
	if err != nil {
		return nil, err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	h := home.Home{Dir: dir}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	mgr, err := pty.NewManager(eng, pty.Options{Dir: dir, BlockOutputCap: -1, ConversationOutputCap: -1})
	if err != nil {
		return nil, err
	}
	defer mgr.Close(context.Background())
	const conv = "bench"
	res := &benchPtyResult{Bytes: o.bytes, Iterations: o.n}
	if o.keep {
		res.Home = dir
	}
	res.Command = fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a`, o.bytes)

	// Warm up: start the shell.
	if _, err := runBlock(ctx, mgr, conv, "true"); err != nil {
		return nil, err
	}
	if o.repeat < 1 {
		o.repeat = 1
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	before := eng.Log().LastSeq()
	var ratios []float64
	for r := 0; r < o.repeat; r++ {
		bare, err := barePty(ctx, res.Command)
		if err != nil {
			return nil, fmt.Errorf("bare pty: %w", err)
		}
		start := time.Now()
		if _, err := runBlock(ctx, mgr, conv, res.Command); err != nil {
			return nil, err
		}
		blk := time.Since(start).Seconds()
		res.Rounds = append(res.Rounds, benchPtyRound{BlockSeconds: blk, BareSeconds: bare, Ratio: bare / blk})
		ratios = append(ratios, bare/blk)
	}
	if o.cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	mid := res.Rounds[0]
	for _, r := range res.Rounds {
		if r.Ratio == pct(ratios, 0.5) {
			mid = r
		}
	}
	res.BlockSeconds, res.BarePtySecs, res.RatioToBare = mid.BlockSeconds, mid.BareSeconds, mid.Ratio
	res.SpoolMBps = float64(o.bytes) / 1e6 / res.BlockSeconds
	res.BarePtyMBps = float64(o.bytes) / 1e6 / res.BarePtySecs
	for ev, err := range eng.Log().Events(before + 1) {
		if err != nil {
			return nil, err
		}
		if ev.Type == "pty.output" {
			res.OutputEvents++
		}
	}
	res.OutputEvents /= o.repeat
	start := time.Now()
	out := exec.CommandContext(ctx, "/bin/bash", "-c", res.Command+" > /dev/null")
	if err := out.Run(); err != nil {
		return nil, fmt.Errorf("outside cmlab: %w", err)
	}
	res.OutsideSeconds = time.Since(start).Seconds()
	res.Slowdown = res.BlockSeconds / res.OutsideSeconds
	// The same command through a bare pty (util-linux script), when
	// installed: how much of the cost is the terminal itself.
	if sp, err := exec.LookPath("script"); err == nil {
		start = time.Now()
		if err := exec.CommandContext(ctx, sp, "-qc", res.Command, "/dev/null").Run(); err == nil {
			res.PlainPtySecs = time.Since(start).Seconds()
		}
	}

	markRE := regexp.MustCompile(`M(\d+)[.,](\d{6})\n`)
	var marks, prompts []float64
	for i := 0; i < o.n; i++ {
		st, err := mgr.Status(ctx, conv)
		if err != nil {
			return nil, err
		}
		if _, err := mgr.ExecBlock(ctx, conv, `echo "M$EPOCHREALTIME"`, "", pty.Request{}); err != nil {
			return nil, err
		}
		w, err := mgr.WaitFor(ctx, conv, pty.WaitParams{Match: `M\d+[.,]\d{6}\n`, MatchType: pty.MatchRegex, FromCursor: st.ResumeCursor, TimeoutMs: 30000})
		now := time.Now()
		if err != nil || !w.Matched {
			return nil, fmt.Errorf("latency block %d: %v %+v", i, err, w)
		}
		m := markRE.FindStringSubmatch(*w.MatchText)
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		usec, _ := strconv.ParseInt(m[2], 10, 64)
		marks = append(marks, float64(now.UnixMicro()-(sec*1e6+usec))/1000)
		p, err := mgr.WaitPrompt(ctx, conv, w.ResumeCursor, 30000)
		now = time.Now()
		if err != nil || !p.Matched {
			return nil, fmt.Errorf("latency block %d: no prompt: %v", i, err)
		}
		prompts = append(prompts, float64(now.UnixMicro()-p.Extra.TS*1000)/1000)
	}
	res.MarkP50Ms, res.MarkP99Ms = pct(marks, 0.50), pct(marks, 0.99)
	res.PromptP50Ms, res.PromptP99Ms = pct(prompts, 0.50), pct(prompts, 0.99)
	return res, nil
}

// barePty runs cmd with bash -c under a pty of the same library and
// window as the terminal's shells, reads the master in 64 KiB reads (as
// the shell's reader does) and discards them; it returns the wall time
// from start to EOF.
func barePty(ctx context.Context, cmd string) (float64, error) {
	start := time.Now()
	c := exec.CommandContext(ctx, "/bin/bash", "-c", cmd)
	f, err := cpty.StartWithSize(c, &cpty.Winsize{Cols: 200, Rows: 50})
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Read(buf); err != nil {
			break // EIO once the last writer closed its side
		}
	}
	if err := c.Wait(); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// runBlock runs cmd as a block and waits for its prompt.
func runBlock(ctx context.Context, mgr *pty.Manager, conv, cmd string) (pty.WaitResult, error) {
	st, err := mgr.Status(ctx, conv)
	if err != nil {
		return pty.WaitResult{}, err
	}
	if _, err := mgr.ExecBlock(ctx, conv, cmd, "", pty.Request{}); err != nil {
		return pty.WaitResult{}, err
	}
	w, err := mgr.WaitPrompt(ctx, conv, st.ResumeCursor, 600000)
	if err == nil && !w.Matched {
		err = fmt.Errorf("block %q: no prompt", cmd)
	}
	return w, err
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// ErrViolations is returned by Run when an invariant was broken.
var ErrViolations = errors.New("torture: invariant violations")

// Options configure Run. Zero values take the documented defaults.
type Options struct {
	// Binary is the cmlab executable to run as the daemon (`Binary serve`).
	// Required.
	Binary string
	// Rounds is the number of kill/restart rounds. Default 5.
	Rounds int
	// Duration, when set, ends the run after the round in progress once it
	// has elapsed (whichever of Rounds and Duration comes first).
	Duration time.Duration
	// Seed makes the choices of the run reproducible; 0 picks one from the
	// clock (it is printed).
	Seed uint64
	// Keep keeps the temporary home even when no invariant broke. It is
	// always kept on a violation.
	Keep bool
	// Dir is where the temporary home is made. Default os.TempDir().
	Dir string
	// Workers is the number of concurrent load clients. Default 4.
	Workers int
	// MinLoad and MaxLoad bound the load time of a round before the kill.
	// Defaults 300 ms and 1500 ms.
	MinLoad, MaxLoad time.Duration
	// Out receives progress and the summary table. Default io.Discard.
	Out io.Writer
	// DaemonLog, when set, receives the daemons' output.
	DaemonLog io.Writer
	// Compact adds compaction to every round: the daemon writes 8 KiB
	// segments and runs its compaction policy every 100 ms (serve
	// --compact-archive, 1 ms resume window), and after each SIGKILL,
	// before the restart, `cmlab compact --archive` moves every segment no
	// holder needs to the archive; the restart and every check then run on
	// the compacted log.
	Compact bool
}

// RoundStat is one line of the summary table.
type RoundStat struct {
	Round     int
	Load      time.Duration
	Feedback  int // acknowledged feedback posts (this round)
	Imports   int
	Submits   int
	Polls     int
	Blocks    int // terminal blocks started
	Steps     int // step transitions acknowledged
	Unknown   int // requests whose answer the kill swallowed
	Resent    int // unknown-outcome request ids sent again after restart
	Replayed  int // acknowledged request ids sent again (must not act)
	WalIndex  uint64
	Events    int // event-stream events read
	Restart   time.Duration
	Check     time.Duration
	Violation int
	Compacted int // segments compaction moved to the archive before the restart
}

// Summary is the outcome of Run.
type Summary struct {
	Seed       uint64
	Home       string // the temporary home ("" once removed)
	Rounds     []RoundStat
	Violations []string
	// Archived is how many segment files compaction (Options.Compact) had
	// moved to the archive by the end, the daemons' and the offline ones.
	Archived int
}

// Run executes the crash loop. It returns ErrViolations (wrapped, with the
// reproducer) when an invariant broke; other errors mean the harness itself
// could not run (for example the daemon did not start).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if opts.Binary == "" {
		return nil, errors.New("torture: Options.Binary is required")
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 5
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.MinLoad <= 0 {
		opts.MinLoad = 300 * time.Millisecond
	}
	if opts.MaxLoad < opts.MinLoad {
		opts.MaxLoad = max(opts.MinLoad, 1500*time.Millisecond)
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Seed == 0 {
		opts.Seed = uint64(time.Now().UnixNano())
	}
	root, err := os.MkdirTemp(opts.Dir, "cmlab-torture-")
	if err != nil {
		return nil, err
	}
	h := &harness{
		opts: opts, root: root, home: filepath.Join(root, "home"),
		env: &env{runsRoot: filepath.Join(root, "runs")},
		l:   newLedger(), rng: rand.New(rand.NewPCG(opts.Seed, 0x70727475)),
	}
	for _, d := range []string{h.home, h.env.runsRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	sum := &Summary{Seed: opts.Seed, Home: h.home}
	fmt.Fprintf(opts.Out, "torture: seed %d, %d rounds, home %s\n", opts.Seed, opts.Rounds, h.home)
	runErr := h.loop(ctx, sum)
	sum.Violations = h.l.violations
	if ents, err := os.ReadDir(filepath.Join(root, "archive")); err == nil {
		sum.Archived = len(ents)
	}
	printSummary(opts.Out, sum)
	if runErr == nil && len(sum.Violations) > 0 {
		runErr = fmt.Errorf("%w: %d (reproduce: cmlab torture --seed %d --rounds %d --keep; home kept at %s)",
			ErrViolations, len(sum.Violations), opts.Seed, opts.Rounds, h.home)
	}
	if runErr == nil && !opts.Keep {
		os.RemoveAll(root)
		sum.Home = ""
	} else {
		fmt.Fprintf(opts.Out, "torture: home kept at %s\n", h.home)
	}
	return sum, runErr
}

type harness struct {
	opts Options
	root string
	home string
	env  *env
	l    *ledger
	rng  *rand.Rand
	d    *daemon
}

func (h *harness) start(ctx context.Context) error {
	var extra []string
	if h.opts.Compact {
		// The daemon compacts too, every 100 ms (a kill may land inside a
		// compaction); its resume window (--lookback) is cut to 1 ms so
		// that recent events do not hold everything. The load's mandates
		// are planned over the API, never resumed, so the window changes
		// no decision of start-up recovery here.
		extra = []string{"--segment-size", "8192", "--compact-archive", filepath.Join(h.root, "archive"),
			"--compact-every", "100ms", "--lookback", "1ms"}
	}
	d, err := startDaemon(ctx, h.opts.Binary, h.home, []string{h.env.runsRoot}, h.opts.DaemonLog, extra...)
	if err != nil {
		return err
	}
	h.d = d
	return nil
}

func (h *harness) loop(ctx context.Context, sum *Summary) error {
	began := time.Now()
	if err := h.start(ctx); err != nil {
		return err
	}
	defer func() {
		if h.d != nil {
			h.d.stop(10 * time.Second)
		}
	}()
	// Seed the world: a few runs so that feedback and experiments have targets.
	seedW := &worker{id: 0, rng: rand.New(rand.NewPCG(h.opts.Seed, 1)), c: newClient(h.d), l: h.l, env: h.env}
	for i := 0; i < 3; i++ {
		seedW.importRun(ctx, "")
	}
	for round := 1; round <= h.opts.Rounds; round++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if h.opts.Duration > 0 && time.Since(began) > h.opts.Duration && round > 1 {
			break
		}
		st, err := h.round(ctx, round)
		sum.Rounds = append(sum.Rounds, st)
		if err != nil {
			return err
		}
	}
	// A clean shutdown must leave a home that reopens with the same views.
	if err := h.d.stop(20 * time.Second); err != nil {
		h.l.violate("final: %v", err)
	}
	h.scanDaemonLog(h.d, 0)
	h.d = nil
	h.checkOffline(ctx)
	return nil
}

func (h *harness) round(ctx context.Context, round int) (RoundStat, error) {
	st := RoundStat{Round: round}
	before := h.snapshotOps()
	h.l.mu.Lock()
	nViol, unknown0, events0 := len(h.l.violations), h.l.unknown, h.l.sse.events
	h.l.mu.Unlock()

	c := newClient(h.d)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 1; i <= h.opts.Workers; i++ {
		w := &worker{id: i, round: round, rng: rand.New(rand.NewPCG(h.opts.Seed, uint64(round*1000+i))), c: c, l: h.l, env: h.env}
		wg.Add(1)
		go func() { defer wg.Done(); w.run(loadCtx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); readSSE(loadCtx, c, h.l, round) }()
	h.l.mu.Lock()
	noTerm := h.l.noTerminal
	h.l.mu.Unlock()
	if !noTerm {
		tw := &worker{id: 99, round: round, rng: rand.New(rand.NewPCG(h.opts.Seed, uint64(round*1000+99))), c: c, l: h.l, env: h.env}
		wg.Add(1)
		go func() { defer wg.Done(); tw.terminal(loadCtx) }()
	}

	span := h.opts.MaxLoad - h.opts.MinLoad
	st.Load = h.opts.MinLoad + time.Duration(h.rng.Int64N(int64(span)+1))
	select {
	case <-time.After(st.Load):
	case <-ctx.Done():
	}
	if !h.d.alive() {
		h.l.violate("round %d: the daemon died on its own during the load (%v); its output:\n%s", round, h.d.err, tail(h.d.log.String(), 3000))
	}
	h.d.kill() // SIGKILL mid-load
	h.scanDaemonLog(h.d, round)
	h.d = nil
	stopLoad()
	wg.Wait()
	c.mu.Lock()
	if c.errs > 0 {
		fmt.Fprintf(h.opts.Out, "round %d: %d transport errors, first: %s\n", round, c.errs, c.firstErr)
	}
	c.mu.Unlock()

	if h.opts.Compact {
		st.Compacted = h.compact(ctx, round)
	}
	t0 := time.Now()
	if err := h.start(ctx); err != nil {
		return st, fmt.Errorf("round %d: restart after SIGKILL: %w", round, err)
	}
	st.Restart = time.Since(t0)
	t1 := time.Now()
	st.Resent, st.Replayed = h.checkAfterRestart(ctx, round)
	st.Check = time.Since(t1)
	if _, idx, err := newClient(h.d).health(ctx); err == nil {
		st.WalIndex = idx
	}

	after := h.snapshotOps()
	st.Feedback = after["feedback"] - before["feedback"]
	st.Imports = after["import"] - before["import"]
	st.Submits = after["submit"] - before["submit"]
	st.Polls = after["poll"] - before["poll"]
	st.Blocks = after["block"] - before["block"]
	st.Steps = after["step.plan"] + after["step.executing"] + after["step.completed"] + after["step.failed"] -
		(before["step.plan"] + before["step.executing"] + before["step.completed"] + before["step.failed"])
	h.l.mu.Lock()
	st.Unknown = h.l.unknown - unknown0
	st.Events = h.l.sse.events - events0
	st.Violation = len(h.l.violations) - nViol
	h.l.mu.Unlock()
	fmt.Fprintf(h.opts.Out, "round %d: load %v, acked fb=%d imp=%d sub=%d, unknown %d, walIndex %d, compacted %d segments, violations %d\n",
		round, st.Load.Round(time.Millisecond), st.Feedback, st.Imports, st.Submits, st.Unknown, st.WalIndex, st.Compacted, st.Violation)
	return st, nil
}

func (h *harness) snapshotOps() map[string]int {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	m := make(map[string]int, len(h.l.ops))
	for k, v := range h.l.ops {
		m[k] = v
	}
	return m
}

func printSummary(out io.Writer, sum *Summary) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tload\tfeedback\timports\tsubmits\tblocks\tsteps\tpolls\tunknown\tresent\treplayed\tsse\twalIndex\trestart\tcheck\tviolations\t")
	var tot RoundStat
	for _, r := range sum.Rounds {
		fmt.Fprintf(tw, "%d\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t%d\t\n", r.Round, r.Load.Round(time.Millisecond),
			r.Feedback, r.Imports, r.Submits, r.Blocks, r.Steps, r.Polls, r.Unknown, r.Resent, r.Replayed, r.Events, r.WalIndex,
			r.Restart.Round(time.Millisecond), r.Check.Round(time.Millisecond), r.Violation)
		tot.Feedback += r.Feedback
		tot.Imports += r.Imports
		tot.Submits += r.Submits
		tot.Polls += r.Polls
		tot.Blocks += r.Blocks
		tot.Steps += r.Steps
		tot.Unknown += r.Unknown
		tot.Resent += r.Resent
		tot.Replayed += r.Replayed
		tot.Events += r.Events
		tot.Load += r.Load
	}
	fmt.Fprintf(tw, "total\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\t\t\t%d\t\n", tot.Load.Round(time.Millisecond), tot.Feedback, tot.Imports,
		tot.Submits, tot.Blocks, tot.Steps, tot.Polls, tot.Unknown, tot.Resent, tot.Replayed, tot.Events, len(sum.Violations))
	tw.Flush()
	for i, v := range sum.Violations {
		if i == 50 {
			fmt.Fprintf(out, "… and %d more\n", len(sum.Violations)-50)
			break
		}
		fmt.Fprintln(out, "VIOLATION:", v)
	}
	if sum.Archived > 0 {
		fmt.Fprintf(out, "compaction archived %d segments\n", sum.Archived)
	}
	fmt.Fprintf(out, "seed %d: %d rounds, %d violations\n", sum.Seed, len(sum.Rounds), len(sum.Violations))
}

// scanDaemonLog flags what a daemon printed that no client could see: a
// data race (the race detector only reports, and a SIGKILLed process has no
// exit code) or a panic.
func (h *harness) scanDaemonLog(d *daemon, round int) {
	out := d.log.String()
	for _, sign := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
		if i := strings.Index(out, sign); i >= 0 {
			h.l.violate("round %d: the daemon printed %q:\n%s", round, sign, tail(out[i:], 3000))
		}
	}
}

// compact runs `cmlab compact --archive` on the home of the killed daemon
// (Options.Compact) and returns how many segments it archived; a failure
// is a violation.
func (h *harness) compact(ctx context.Context, round int) int {
	cmd := exec.CommandContext(ctx, h.opts.Binary, "compact", "--home", h.home, "--archive", filepath.Join(h.root, "archive"),
		"--resume-window", "1ms", "--json")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		h.l.violate("round %d: cmlab compact after the kill: %v\n%s", round, err, tail(msg, 1500))
		return 0
	}
	var rep struct {
		Segments []json.RawMessage `json:"segments"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		h.l.violate("round %d: cmlab compact --json: %v", round, err)
	}
	return len(rep.Segments)
}

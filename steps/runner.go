package steps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/cmlab/cmlab/events"
)

// Errors of a mandate run.
var (
	// ErrNeedsReview: a step of the mandate awaits a human (exit code 4).
	ErrNeedsReview = errors.New("step awaits manual review")
	// ErrInterrupted: a step was left executing by a crash; recovery must
	// decide about it before the mandate can resume.
	ErrInterrupted = errors.New("step interrupted during execution")
	// ErrStepFailed: a step's command failed; the mandate stops there.
	ErrStepFailed = errors.New("step failed")
	// ErrPlanMismatch: the mandate file differs from the recorded plan.
	ErrPlanMismatch = errors.New("mandate differs from its recorded plan")
	// ErrCancelled is the cause a runner's context is cancelled with when
	// its operator stops it (Ctrl+C on `cmlab run`): the running step is
	// killed and recorded failed with error_class "cancelled". Any other
	// cancellation (daemon shutdown) kills the step and leaves it
	// executing for the next start to classify.
	ErrCancelled = errors.New("cancelled")
	// ErrInFlight: the step's recorded process (or one of its process
	// group) still runs; the step is not started again until it is gone.
	ErrInFlight = errors.New("step's process still running")
)

// ErrorClassCancelled is the error_class of a step stopped by its operator.
const ErrorClassCancelled = "cancelled"

// CrashPoint names the moments of a step at which a test may kill the runner.
type CrashPoint int

// The crash points of a step, in order: BeforeExecuting, ChildStarted,
// AfterExecuting, AfterSideEffect, AfterCompleted.
const (
	BeforeExecuting CrashPoint = iota + 1 // plan recorded, no process yet
	AfterExecuting                        // executing recorded (with the process), the process still at its gate
	AfterSideEffect                       // command finished, completed not recorded
	AfterCompleted                        // completed recorded
	ChildStarted                          // the process started at its gate, executing not recorded
)

func (p CrashPoint) String() string {
	switch p {
	case BeforeExecuting:
		return "before_executing"
	case AfterExecuting:
		return "after_executing"
	case AfterSideEffect:
		return "after_side_effect"
	case AfterCompleted:
		return "after_completed"
	case ChildStarted:
		return "child_started"
	}
	return "crash_point_" + strconv.Itoa(int(p))
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Recorder receives the transitions. Required.
	Recorder Recorder
	// Base is the directory relative step cwds resolve against (the
	// mandate file's directory). Default: the working directory.
	Base string
	// Output receives each command's combined output and progress lines.
	// Default: discarded.
	Output io.Writer
	// StepOutput, when set, opens a writer that also receives the combined
	// output of each attempt of a step (CaptureOutput: a file under the
	// home that 'cmlab step show' prints). A failure to open it is
	// reported on Output and the step runs without it.
	StepOutput func(mandateID, stepID string) (w io.Writer, closeFn func() error, err error)
	// LookupEnv reads the runner's environment for the env allow-list.
	// Default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Dirs, when set, overrides step working directories (step id →
	// absolute dir) with those recorded in the plan: a daemon resuming a
	// mandate planned elsewhere.
	Dirs map[string]string
	// Hook, when set, is called at each crash point of each step (tests kill
	// the process there). Production code leaves it nil.
	Hook func(point CrashPoint, stepID string)
}

// Runner executes mandates through the durable step transitions.
type Runner struct {
	opts RunnerOptions
	self Process // this process, recorded as the runner of each step
}

// NewRunner validates opts.
func NewRunner(opts RunnerOptions) (*Runner, error) {
	if opts.Recorder == nil {
		return nil, errors.New("recovery: RunnerOptions.Recorder is required")
	}
	if opts.Base == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		opts.Base = wd
	}
	if !filepath.IsAbs(opts.Base) {
		abs, err := filepath.Abs(opts.Base)
		if err != nil {
			return nil, err
		}
		opts.Base = abs
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	self, _ := ProcessOf(os.Getpid()) // zero without /proc: no runner recorded
	return &Runner{opts: opts, self: self}, nil
}

// StepResult is the outcome of one step of a run.
type StepResult struct {
	StepID       string `json:"step_id"`
	Status       string `json:"status"`
	ExitCode     *int   `json:"exit_code,omitempty"`
	OutputDigest string `json:"output_digest,omitempty"`
	ResultHash   string `json:"result_hash,omitempty"`
	// FromLog is true when the result was read from the log (the step had
	// completed before) instead of running the command.
	FromLog bool `json:"from_log"`
}

// RunResult is the outcome of a run.
type RunResult struct {
	MandateID string       `json:"mandate_id"`
	Planned   bool         `json:"planned"` // this run committed the plan
	Steps     []StepResult `json:"steps"`
}

// ResultHash is the hash over a command's exit code and output digest.
func ResultHash(exitCode int, outputDigest string) string {
	return HashBytes([]byte("exit_code=" + strconv.Itoa(exitCode) + "\noutput_digest=" + outputDigest + "\n"))
}

// stepDir is the absolute working directory of a step.
func (r *Runner) stepDir(s MandateStep) string {
	if d := r.opts.Dirs[s.ID]; d != "" {
		return d
	}
	if s.Cwd == "" {
		return r.opts.Base
	}
	return resolve(r.opts.Base, s.Cwd)
}

// PlanOf builds the step.planned payload of m: pre hashes are the worlds
// as they are now.
func (r *Runner) PlanOf(m Mandate, spec []byte) (*events.StepPlanned, error) {
	id := m.MandateID()
	p := &events.StepPlanned{MandateID: id, Name: m.Name, Spec: compactJSON(spec)}
	for _, s := range m.Steps {
		ps := events.PlannedStep{StepID: s.ID, Tool: s.Argv[0], ParamsHash: s.ParamsHash(), Dir: r.stepDir(s)}
		ps.IdemKey = IdemKey(id, s.ID, ps.ParamsHash)
		if len(s.World) > 0 {
			ps.World = append([]string(nil), s.World...)
			pre, err := WorldHash(ps.Dir, s.World)
			if err != nil {
				return nil, err
			}
			ps.PreHash = pre
		}
		post, err := s.expectedPost()
		if err != nil {
			return nil, err
		}
		ps.ExpectedPostHash = post
		p.Steps = append(p.Steps, ps)
	}
	return p, nil
}

func (r *Runner) hook(p CrashPoint, step string) {
	if r.opts.Hook != nil {
		r.opts.Hook(p, step)
	}
}

func (r *Runner) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Output, "cmlab run: "+format+"\n", args...)
}

// Run plans m (unless its plan is already recorded) and runs every step
// that is not completed, in order. A completed step is never run again: its
// result (exit code, output digest) is read from the log. spec is the
// mandate file's bytes, recorded with the plan so a daemon can resume it.
func (r *Runner) Run(ctx context.Context, m Mandate, spec []byte) (*RunResult, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	id := m.MandateID()
	res := &RunResult{MandateID: id}
	st, err := r.opts.Recorder.Mandate(ctx, id)
	if err != nil {
		return nil, err
	}
	if st == nil || st.Orphan {
		plan, err := r.PlanOf(m, spec)
		if err != nil {
			return nil, err
		}
		if err := r.opts.Recorder.Record(ctx, plan); err != nil {
			return nil, fmt.Errorf("recording the plan of %s: %w", id, err)
		}
		res.Planned = true
		if st, err = r.opts.Recorder.Mandate(ctx, id); err != nil {
			return nil, err
		}
		if st == nil {
			return nil, fmt.Errorf("recovery: plan of %s recorded but not visible", id)
		}
	}
	if err := matchPlan(m, st); err != nil {
		return nil, err
	}
	if st.Cancelled {
		return res, fmt.Errorf("%w: %s (%s); use a new mandate id to run it again", ErrMandateCancelled, id, orDash(st.CancelReason))
	}
	for _, ms := range m.Steps {
		if ctx.Err() != nil {
			return res, fmt.Errorf("%s: stopped before step %s: %w", id, ms.ID, context.Cause(ctx))
		}
		s := st.Step(ms.ID)
		switch s.Status {
		case events.StatusCompleted:
			res.Steps = append(res.Steps, StepResult{StepID: s.StepID, Status: s.Status, ExitCode: s.ExitCode,
				OutputDigest: s.OutputDigest, ResultHash: s.ResultHash, FromLog: true})
			r.logf("%s/%s: completed before (recorded result %s), not run again", id, s.StepID, orDash(s.ResultHash))
			continue
		case events.StatusNeedsReview:
			res.Steps = append(res.Steps, StepResult{StepID: s.StepID, Status: s.Status})
			return res, fmt.Errorf("%w: %s/%s (%s); resolve it with `cmlab step complete|fail|reset`", ErrNeedsReview, id, s.StepID, orDash(s.Reason))
		case events.StatusExecuting:
			res.Steps = append(res.Steps, StepResult{StepID: s.StepID, Status: s.Status})
			if running, _ := s.Process().Running(); running {
				return res, fmt.Errorf("%w: %s/%s is executing and its process (pid %d) still runs; wait for it, then `cmlab recover --apply`", ErrInFlight, id, s.StepID, s.Pid)
			}
			return res, fmt.Errorf("%w: %s/%s was executing when its runner stopped; run `cmlab recover --apply` first", ErrInterrupted, id, s.StepID)
		}
		sr, err := r.runStep(ctx, id, ms, s)
		res.Steps = append(res.Steps, sr)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// matchPlan checks that the mandate file is the plan that was recorded.
func matchPlan(m Mandate, st *MandateState) error {
	planned := 0
	for _, s := range st.Steps {
		if !s.Orphan {
			planned++
		}
	}
	if planned != len(m.Steps) {
		return fmt.Errorf("%w: %s was planned with %d steps, the file has %d", ErrPlanMismatch, st.MandateID, planned, len(m.Steps))
	}
	for _, ms := range m.Steps {
		s := st.Step(ms.ID)
		if s == nil || s.Orphan {
			return fmt.Errorf("%w: %s has no planned step %s", ErrPlanMismatch, st.MandateID, ms.ID)
		}
		if s.ParamsHash != ms.ParamsHash() {
			return fmt.Errorf("%w: step %s/%s changed since it was planned (params_hash %s, file %s); use a new mandate id", ErrPlanMismatch, st.MandateID, ms.ID, s.ParamsHash, ms.ParamsHash())
		}
	}
	return nil
}

func (r *Runner) runStep(ctx context.Context, id string, ms MandateStep, s *StepState) (StepResult, error) {
	sr := StepResult{StepID: ms.ID}
	dir := r.stepDir(ms)
	// A process of an earlier attempt (its runner killed, the step reset
	// by hand) may still be acting: never start a second one beside it.
	if running, err := s.Process().Running(); err != nil {
		return sr, fmt.Errorf("%s/%s: is pid %d still running? %w", id, ms.ID, s.Pid, err)
	} else if running {
		return sr, fmt.Errorf("%w: %s/%s: pid %d of an earlier attempt still runs; wait for it or stop it", ErrInFlight, id, ms.ID, s.Pid)
	}
	r.hook(BeforeExecuting, ms.ID)
	pre, err := WorldHash(dir, ms.World)
	if err != nil {
		return sr, err
	}
	// The step's process dies with this goroutine's thread (Pdeathsig):
	// keep the goroutine on that thread until the process is waited for
	// (startGated explains why).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out bytes.Buffer
	sink := io.MultiWriter(&out, r.opts.Output)
	if r.opts.StepOutput != nil { // output.go
		if w, closeFn, err := r.opts.StepOutput(id, ms.ID); err != nil {
			r.logf("%s/%s: its output is not captured: %v", id, ms.ID, err)
		} else {
			defer closeFn()
			sink = io.MultiWriter(&out, r.opts.Output, w)
		}
	}
	var g *gatedCommand
	startErr := checkStepDir(dir) // a missing cwd would read as exec failing to find the shell
	if startErr == nil {
		g, startErr = startGated(ms.Argv, dir, r.env(ms, id, s.IdemKey), sink)
	}
	if startErr != nil {
		// Nothing runs: record the attempt and its failure.
		if err := r.opts.Recorder.Record(ctx, &events.StepExecuting{MandateID: id, StepID: ms.ID, IdemKey: s.IdemKey, ObservedPreHash: pre}); err != nil {
			return sr, fmt.Errorf("recording %s/%s executing: %w", id, ms.ID, err)
		}
		sr.Status = events.StatusFailed
		if err := r.opts.Recorder.Record(ctx, &events.StepFailed{MandateID: id, StepID: ms.ID, ErrorClass: "start", ErrorMsg: CutErrorMsg(startErr.Error())}); err != nil {
			return sr, err
		}
		return sr, fmt.Errorf("%w: %s/%s: %v", ErrStepFailed, id, ms.ID, startErr)
	}
	// Every way out of here kills what is left of the step's process
	// group and reaps the process; the runner's own death kills its
	// process (Pdeathsig).
	defer g.stop()
	r.hook(ChildStarted, ms.ID)
	// The process waits at its gate until its pid and start time are in
	// the log: a crash before that leaves a pending step and a process
	// that dies without acting.
	ex := &events.StepExecuting{MandateID: id, StepID: ms.ID, IdemKey: s.IdemKey, ObservedPreHash: pre,
		Pid: g.proc.Pid, PidStart: g.proc.Start, BootID: g.proc.BootID, RunnerPid: r.self.Pid, RunnerStart: r.self.Start}
	if err := r.opts.Recorder.Record(ctx, ex); err != nil {
		g.stop()
		return sr, fmt.Errorf("recording %s/%s executing: %w", id, ms.ID, err)
	}
	r.hook(AfterExecuting, ms.ID)
	r.logf("%s/%s: running %q (pid %d)", id, ms.ID, ms.Argv, g.proc.Pid)
	if ctx.Err() == nil { // stopped meanwhile: the gate stays shut, waitStep kills
		g.open() // a gate that cannot open (the process died) shows in Wait
	}
	runErr := waitStep(ctx, g)
	if errors.Is(runErr, exec.ErrWaitDelay) && g.cmd.ProcessState != nil && g.cmd.ProcessState.Success() {
		// Exited 0, but a process it left behind kept the output open.
		runErr = nil
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), ErrCancelled) {
			// Stopped by its operator: the process group is dead (waited
			// for above); record the end under a context of its own.
			sr.Status = events.StatusFailed
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			msg := fmt.Sprintf("%v while running (pid %d killed)", context.Cause(ctx), g.proc.Pid)
			if err := r.opts.Recorder.Record(rctx, &events.StepFailed{MandateID: id, StepID: ms.ID, ErrorClass: ErrorClassCancelled, ErrorMsg: CutErrorMsg(msg)}); err != nil {
				return sr, fmt.Errorf("%s/%s cancelled, but recording it failed: %w", id, ms.ID, err)
			}
			r.logf("%s/%s: cancelled (%v); recorded step.failed (error_class %s)", id, ms.ID, context.Cause(ctx), ErrorClassCancelled)
			return sr, fmt.Errorf("%s/%s: %w", id, ms.ID, context.Cause(ctx))
		}
		// Cancelled otherwise (daemon shutdown): the command was killed
		// mid-way, so the step stays executing and the next start
		// classifies it.
		r.logf("%s/%s: interrupted (%v); left executing", id, ms.ID, context.Cause(ctx))
		return sr, fmt.Errorf("%w: %s/%s: %w", ErrInterrupted, id, ms.ID, context.Cause(ctx))
	}
	r.hook(AfterSideEffect, ms.ID)

	digest := HashBytes(out.Bytes())
	var exitErr *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exitErr):
		code := exitErr.ExitCode()
		sr.Status, sr.ExitCode, sr.OutputDigest = events.StatusFailed, &code, digest
		msg := fmt.Sprintf("%s: %s", exitErr.Error(), tail(out.Bytes(), 400))
		if err := r.opts.Recorder.Record(ctx, &events.StepFailed{MandateID: id, StepID: ms.ID, ErrorClass: "exit_status", ErrorMsg: CutErrorMsg(msg), ExitCode: &code}); err != nil {
			return sr, err
		}
		return sr, fmt.Errorf("%w: %s/%s exited with %d", ErrStepFailed, id, ms.ID, code)
	default:
		sr.Status = events.StatusFailed
		if err := r.opts.Recorder.Record(ctx, &events.StepFailed{MandateID: id, StepID: ms.ID, ErrorClass: "wait", ErrorMsg: CutErrorMsg(runErr.Error())}); err != nil {
			return sr, err
		}
		return sr, fmt.Errorf("%w: %s/%s: %v", ErrStepFailed, id, ms.ID, runErr)
	}
	post, err := WorldHash(dir, ms.World)
	if err != nil {
		return sr, err
	}
	code := 0
	if s.ExpectedPostHash != "" && post != s.ExpectedPostHash {
		sr.Status, sr.ExitCode, sr.OutputDigest = events.StatusFailed, &code, digest
		msg := fmt.Sprintf("exit status 0 but the world is %s, not the expected %s", post, s.ExpectedPostHash)
		if err := r.opts.Recorder.Record(ctx, &events.StepFailed{MandateID: id, StepID: ms.ID, ErrorClass: "unexpected_post_state", ErrorMsg: msg, ExitCode: &code}); err != nil {
			return sr, err
		}
		return sr, fmt.Errorf("%w: %s/%s: %s", ErrStepFailed, id, ms.ID, msg)
	}
	rh := ResultHash(code, digest)
	if err := r.opts.Recorder.Record(ctx, &events.StepCompleted{MandateID: id, StepID: ms.ID, PostHash: post, ResultHash: rh, ExitCode: &code, OutputDigest: digest}); err != nil {
		return sr, fmt.Errorf("recording %s/%s completed: %w", id, ms.ID, err)
	}
	r.hook(AfterCompleted, ms.ID)
	sr.Status, sr.ExitCode, sr.OutputDigest, sr.ResultHash = events.StatusCompleted, &code, digest, rh
	return sr, nil
}

// waitStep waits for the step's process; when ctx ends first, the process
// group is killed (and then waited for).
func waitStep(ctx context.Context, g *gatedCommand) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
			g.kill()
		case <-done:
		}
	})
	err := g.wait()
	close(done)
	wg.Wait()
	return err
}

// env is the allow-listed environment plus the step's identity, so a
// command can make its own side effects idempotent on CMLAB_IDEM_KEY.
func (r *Runner) env(ms MandateStep, id, idem string) []string {
	var env []string
	for _, name := range ms.Env {
		if v, ok := r.opts.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return append(env, "CMLAB_MANDATE_ID="+id, "CMLAB_STEP_ID="+ms.ID, "CMLAB_IDEM_KEY="+idem)
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

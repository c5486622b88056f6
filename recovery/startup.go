package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/steps"
)

// DefaultLookback is the auto-resume window (seed 004's 2 hours).
const DefaultLookback = 2 * time.Hour

// Reasons of automatic decisions at daemon start.
const (
	ResumeAuto          = "auto_resume"
	ResumeWait          = "wait_for_operator"
	WhyWithinLookback   = "within_lookback"
	WhyOutsideLookback  = "outside_lookback"
	WhyManualReview     = "manual_review_step"
	WhyNotResumable     = "no_mandate_spec"
	WhyFailed           = "failed_step"
	WhyStepAwaitsReview = "step_awaits_review"
	WhyInFlight         = "step_in_flight" // a step's process still runs
)

// StartOptions configure the recovery run at every daemon start.
type StartOptions struct {
	// Lookback is the auto-resume window (default 2h): an interrupted
	// mandate whose last transition is older waits for the operator.
	Lookback time.Duration
	// Now is the clock (injected in tests). Default time.Now.
	Now func() time.Time
	// NoResume disables auto-resume (decisions are still logged).
	NoResume bool
	// Output receives resumed commands' output. Default: discarded.
	Output io.Writer
	// OutputFile, when set, opens a writer per resumed mandate that also
	// receives its output (ResumeOutputFile: a file under the home).
	OutputFile func(mandateID string) (w io.Writer, closeFn func() error, err error)
	// OnResumed, when set, is called after each resumed mandate's run with
	// its result (steps with their exit code and output digest) and error.
	OnResumed func(mandateID string, res *steps.RunResult, err error)
	// Hook is passed to the runner of resumed mandates (tests).
	Hook func(point steps.CrashPoint, stepID string)
	// CloseCrashed closes open terminal blocks and sessions; default
	// pty.CloseCrashed.
	CloseCrashed func(ctx context.Context, eng *engine.Engine) ([]string, error)
}

// Recover classifies every step of j's state with world hashes computed now.
func Recover(j *steps.Journal, opts PlanOptions) *Plan {
	return BuildPlan(j.State().Mandates(), opts)
}

// OnStart runs recovery steps 3–5 of SPEC §8 on an open engine (the engine
// already repaired the tail and caught the views up) and then runs the
// resumed mandates to the end before it returns. It is Start followed by
// Resumer.Run: for `cmlab mcp` and tests. A daemon uses Start and runs the
// Resumer in the background (Resumer.Start/Stop), so a long mandate does
// not keep it from listening.
func OnStart(ctx context.Context, j *steps.Journal, opts StartOptions) (*Plan, error) {
	plan, res, err := Start(ctx, j, opts)
	if err != nil {
		return plan, err
	}
	for id, rerr := range res.Run(ctx) {
		planMandate(plan, id).ResumeError = rerr.Error()
	}
	if ctx.Err() != nil {
		return plan, ctx.Err()
	}
	return plan, nil
}

// Start decides and records, synchronously, what start-up recovery does:
//
//  3. every step is classified with world hashes computed now;
//  4. terminal blocks and interactive sessions left open are closed
//     (pty.CloseCrashed: one pty.block.end, failed, daemon_crashed);
//  5. the plan is returned for the daemon to print.
//
// Then auto-resume (seed 004): an open mandate recorded by `cmlab run` whose
// last transition is younger than Lookback and whose open steps are all
// already_done or safe_to_retry (none in_flight: a step whose process
// still runs is never run again beside it) gets its decisions applied here; running it
// is left to the returned Resumer (never nil when err is nil), each resumed
// step reusing its idem_key and completed steps read from the log. Older
// mandates, those with a manual_review step, a failed step, or no recorded
// spec wait for the operator; a cancelled mandate (mandate.cancelled) is
// skipped. j is the daemon's one step journal, the one
// its steps API records through too, so that a check and an append of a
// transition never interleave with another's. Each decision and its reason go into one
// recovery.applied event (auto: true) — only when it differs from the last
// one recorded for that mandate, so restarts add nothing new.
func Start(ctx context.Context, j *steps.Journal, opts StartOptions) (*Plan, *Resumer, error) {
	eng := j.Engine()
	if opts.Lookback <= 0 {
		opts.Lookback = DefaultLookback
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CloseCrashed == nil {
		opts.CloseCrashed = pty.CloseCrashed
	}
	plan := Recover(j, PlanOptions{})
	closed, err := opts.CloseCrashed(ctx, eng)
	if err != nil {
		return plan, nil, fmt.Errorf("recovery: closing terminal blocks left open: %w", err)
	}
	plan.ClosedTerminal = closed

	now := opts.Now()
	byMandate := map[string][]PlanStep{}
	for _, s := range plan.Steps {
		byMandate[s.MandateID] = append(byMandate[s.MandateID], s)
	}
	var waits []events.RecoveryDecision
	var resume []string
	decision := map[string]events.RecoveryDecision{}
	for i := range plan.Mandates {
		pm := &plan.Mandates[i]
		m := j.State().Mandate(pm.MandateID)
		if m == nil || m.Status == steps.MandateCompleted || m.Cancelled {
			continue // nothing to resume; a cancelled mandate is never resumed
		}
		action, why := decideResume(m, byMandate[pm.MandateID], now, opts.Lookback)
		if opts.NoResume && action == ResumeAuto {
			action, why = ResumeWait, "auto_resume_disabled"
		}
		pm.Resume, pm.Reason = action, why
		d := events.RecoveryDecision{MandateID: m.MandateID, Status: m.Status, Action: action, Reason: why}
		if action == ResumeAuto {
			resume = append(resume, m.MandateID)
			decision[m.MandateID] = d
		} else if m.LastAuto == nil || m.LastAuto.Action != action || m.LastAuto.Reason != why {
			waits = append(waits, d)
		}
	}
	// Waiting decisions are logged once, when they change.
	if _, err := Apply(ctx, j, plan, ApplyOptions{Auto: true, Only: map[string]bool{}, Extra: waits}); err != nil {
		return plan, nil, err
	}
	// Each resumed mandate: its decisions and the resume choice in one
	// recovery.applied, here; the run is the Resumer's. A mandate whose
	// decisions do not apply (its state moved) is reported, not fatal to
	// the daemon.
	res := &Resumer{j: j, opts: opts}
	for _, id := range resume {
		pm := planMandate(plan, id)
		if _, err := Apply(ctx, j, plan, ApplyOptions{Auto: true, Only: map[string]bool{id: true}, Extra: []events.RecoveryDecision{decision[id]}}); err != nil {
			if !isTransitionError(err) {
				return plan, nil, err
			}
			pm.ResumeError = err.Error()
			continue
		}
		res.ids = append(res.ids, id)
	}
	return plan, res, nil
}

// Resumer runs the mandates Start decided to resume. Run runs them in the
// caller's goroutine; Start runs them in one background goroutine under a
// context the Resumer derives from the caller's, and Stop cancels that
// context and waits for the goroutine, so the daemon that started it owns
// it until shutdown. A step whose command is running when the context is
// cancelled is killed and left executing (no step.failed is recorded): the
// next start classifies it.
type Resumer struct {
	j    *steps.Journal
	opts StartOptions
	ids  []string

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	results map[string]error
}

// Mandates are the ids of the mandates to resume, in plan order.
func (r *Resumer) Mandates() []string { return append([]string(nil), r.ids...) }

// Run resumes each mandate in turn and returns the error of each mandate
// that did not complete (nil map when all did). It stops at the first
// mandate interrupted by ctx.
func (r *Resumer) Run(ctx context.Context) map[string]error {
	var errs map[string]error
	for _, id := range r.ids {
		res, err := resumeMandate(ctx, r.j, id, r.opts)
		if r.opts.OnResumed != nil {
			r.opts.OnResumed(id, res, err)
		}
		if err != nil {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[id] = err
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errs
}

// Start runs the mandates in the background; it returns at once. It is a
// no-op after the first call, and when there is nothing to resume.
func (r *Resumer) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return
	}
	r.done = make(chan struct{})
	if len(r.ids) == 0 {
		close(r.done)
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	go func() {
		defer close(r.done)
		errs := r.Run(ctx)
		r.mu.Lock()
		r.results = errs
		r.mu.Unlock()
	}()
}

// Wait blocks until the background run ends or ctx is done, and returns the
// per-mandate errors of the run (nil when every mandate completed).
func (r *Resumer) Wait(ctx context.Context) (map[string]error, error) {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return nil, nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results, nil
}

// Stop cancels the background run and waits for it to end.
func (r *Resumer) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}

// decideResume picks the automatic decision for an open mandate.
func decideResume(m *steps.MandateState, planned []PlanStep, now time.Time, lookback time.Duration) (action, why string) {
	if len(m.Spec) == 0 {
		return ResumeWait, WhyNotResumable
	}
	switch m.Status {
	case steps.MandateFailed:
		return ResumeWait, WhyFailed
	case steps.MandatePaused:
		return ResumeWait, WhyStepAwaitsReview
	}
	for _, s := range planned {
		if s.Verdict == InFlight {
			return ResumeWait, WhyInFlight
		}
	}
	for _, s := range planned {
		if s.Status != events.StatusCompleted && s.Verdict == ManualReview {
			return ResumeWait, WhyManualReview
		}
	}
	age := now.Sub(time.UnixMilli(m.LastTS))
	if age > lookback {
		return ResumeWait, WhyOutsideLookback
	}
	return ResumeAuto, WhyWithinLookback
}

// resumeMandate runs a mandate from its recorded spec through j.
func resumeMandate(ctx context.Context, j *steps.Journal, id string, opts StartOptions) (*steps.RunResult, error) {
	m := j.State().Mandate(id)
	if m == nil || len(m.Spec) == 0 {
		return nil, errors.New("no recorded mandate spec")
	}
	md, err := steps.ParseMandate(m.Spec)
	if err != nil {
		return nil, err
	}
	out := opts.Output
	if opts.OutputFile != nil {
		w, closeOut, err := opts.OutputFile(id)
		if err != nil {
			return nil, fmt.Errorf("resumed output of %s: %w", id, err)
		}
		defer closeOut()
		if out != nil {
			w = io.MultiWriter(out, w)
		}
		out = w
	}
	// Relative cwds were resolved at plan time: the runner uses each step's
	// recorded absolute dir.
	dirs := map[string]string{}
	for _, s := range m.Steps {
		dirs[s.StepID] = s.Dir
	}
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Output: out, Hook: opts.Hook, Dirs: dirs,
		StepOutput: steps.CaptureOutput(j.Engine().Home())})
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, md, m.Spec)
}

// ResumeOutputFile returns a StartOptions.OutputFile that appends each
// resumed mandate's output (its commands' combined output and the runner's
// progress lines, which name mandate and step) to
// state/resume/<mandate_id>.log under h, created 0600.
func ResumeOutputFile(h home.Home) func(mandateID string) (io.Writer, func() error, error) {
	return func(id string) (io.Writer, func() error, error) {
		p, err := ResumeLogPath(h, id)
		if err != nil {
			return nil, nil, err
		}
		// The resume stops without it and is tried again at every start:
		// say what to do.
		cannot := func(err error) error {
			return fmt.Errorf("the resumed mandate's output %s cannot be opened: %w; fix: make it a file (or remove it: it keeps only output) in a state/resume/ the daemon's user can write, then restart the daemon", h.Rel(p), err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, nil, cannot(err)
		}
		f, err := home.OpenOwn(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, cannot(err)
		}
		return f, f.Close, nil
	}
}

// ResumeLogPath is where a daemon keeps a resumed mandate's output:
// state/resume/<mandate_id>.log under h.
func ResumeLogPath(h home.Home, mandateID string) (string, error) {
	if err := home.ValidateID(mandateID); err != nil {
		return "", err
	}
	return filepath.Join(h.StateDir(), "resume", mandateID+".log"), nil
}

func planMandate(p *Plan, id string) *PlanMandate {
	for i := range p.Mandates {
		if p.Mandates[i].MandateID == id {
			return &p.Mandates[i]
		}
	}
	return &PlanMandate{MandateID: id}
}

// isTransitionError reports errors about a step's state, as opposed to the
// log failing.
func isTransitionError(err error) bool {
	return errors.Is(err, steps.ErrInvalidTransition) || errors.Is(err, steps.ErrInvalidStep) ||
		errors.Is(err, steps.ErrUnknownMandate) || errors.Is(err, steps.ErrUnknownStep)
}

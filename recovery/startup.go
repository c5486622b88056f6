package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
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
	// Hook is passed to the runner of resumed mandates (tests).
	Hook func(point CrashPoint, stepID string)
	// CloseCrashed closes open terminal blocks and sessions; default
	// pty.CloseCrashed.
	CloseCrashed func(ctx context.Context, eng *engine.Engine) ([]string, error)
}

// Recover classifies every step of j's state with world hashes computed now.
func Recover(j *Journal, opts PlanOptions) *Plan {
	return BuildPlan(j.State().Mandates(), opts)
}

// OnStart runs recovery steps 3–5 of SPEC §8 on an open engine (the engine
// already repaired the tail and caught the views up):
//
//  3. every step is classified with world hashes computed now;
//  4. terminal blocks and interactive sessions left open are closed
//     (pty.CloseCrashed: one pty.block.end, failed, daemon_crashed);
//  5. the plan is returned for the daemon to print.
//
// Then auto-resume (seed 004): an open mandate recorded by `cmlab run` whose
// last transition is younger than Lookback and whose open steps are all
// already_done or safe_to_retry gets its decisions applied and is run to
// the end here, each resumed step reusing its idem_key and completed steps
// read from the log. Older mandates, those with a manual_review step, a
// failed step, or no recorded spec wait for the operator. Each decision and
// its reason go into one recovery.applied event (auto: true) — only when it
// differs from the last one recorded for that mandate, so restarts add
// nothing new.
func OnStart(ctx context.Context, eng *engine.Engine, opts StartOptions) (*Plan, error) {
	if opts.Lookback <= 0 {
		opts.Lookback = DefaultLookback
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CloseCrashed == nil {
		opts.CloseCrashed = pty.CloseCrashed
	}
	j, err := NewJournal(eng)
	if err != nil {
		return nil, err
	}
	plan := Recover(j, PlanOptions{})
	closed, err := opts.CloseCrashed(ctx, eng)
	if err != nil {
		return plan, fmt.Errorf("recovery: closing terminal blocks left open: %w", err)
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
		if m == nil || m.Status == MandateCompleted {
			continue
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
		return plan, err
	}
	// Each resumed mandate: its decisions and the resume choice in one
	// recovery.applied, then the run. A mandate whose decisions do not
	// apply (its state moved) is reported, not fatal to the daemon.
	for _, id := range resume {
		pm := planMandate(plan, id)
		if _, err := Apply(ctx, j, plan, ApplyOptions{Auto: true, Only: map[string]bool{id: true}, Extra: []events.RecoveryDecision{decision[id]}}); err != nil {
			if !isTransitionError(err) {
				return plan, err
			}
			pm.ResumeError = err.Error()
			continue
		}
		if err := resumeMandate(ctx, j, id, opts); err != nil {
			pm.ResumeError = err.Error()
			if ctx.Err() != nil {
				return plan, ctx.Err()
			}
		}
	}
	return plan, nil
}

// decideResume picks the automatic decision for an open mandate.
func decideResume(m *MandateState, steps []PlanStep, now time.Time, lookback time.Duration) (action, why string) {
	if len(m.Spec) == 0 {
		return ResumeWait, WhyNotResumable
	}
	switch m.Status {
	case MandateFailed:
		return ResumeWait, WhyFailed
	case MandatePaused:
		return ResumeWait, WhyStepAwaitsReview
	}
	for _, s := range steps {
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
func resumeMandate(ctx context.Context, j *Journal, id string, opts StartOptions) error {
	m := j.State().Mandate(id)
	if m == nil || len(m.Spec) == 0 {
		return errors.New("no recorded mandate spec")
	}
	md, err := ParseMandate(m.Spec)
	if err != nil {
		return err
	}
	// Relative cwds were resolved at plan time: the runner uses each step's
	// recorded absolute dir.
	r, err := NewRunner(RunnerOptions{Recorder: j, Output: opts.Output, Hook: opts.Hook})
	if err != nil {
		return err
	}
	r.dirs = map[string]string{}
	for _, s := range m.Steps {
		r.dirs[s.StepID] = s.Dir
	}
	_, err = r.Run(ctx, md, m.Spec)
	return err
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
	return errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrInvalidStep) ||
		errors.Is(err, ErrUnknownMandate) || errors.Is(err, ErrUnknownStep)
}

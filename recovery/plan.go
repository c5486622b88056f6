package recovery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/steps"
)

// Actions of a recovery plan.
const (
	ActionNone        = "none"         // nothing to append
	ActionComplete    = "complete"     // step.completed recovered:true
	ActionReset       = "reset"        // step.reset to pending, same idem_key
	ActionNeedsReview = "needs_review" // step.needs_review, mandate paused
)

// PlanStep is one line of a recovery plan.
type PlanStep struct {
	MandateID string          `json:"mandate_id"`
	StepID    string          `json:"step_id"`
	Status    string          `json:"status"`
	Verdict   string          `json:"verdict"`
	Evidence  events.Evidence `json:"evidence"`
	Action    string          `json:"action"`
	// Current is the step's world hash computed now ("" without a world).
	Current string `json:"current_hash,omitempty"`
	// Note explains an action of none that is not obvious.
	Note string `json:"note,omitempty"`
	// Pid is the step's recorded process (0: none recorded).
	Pid int `json:"pid,omitempty"`
	// LivePid, for an in_flight step whose recorded process has exited, is
	// a process of its group that still runs (the one to wait for or stop).
	LivePid int `json:"live_pid,omitempty"`
	// ErrorClass is a failed step's recorded error class: it failed cleanly
	// (its runner saw it end), which the table says instead of the
	// classifier's verdict.
	ErrorClass string `json:"error_class,omitempty"`
	// Seq is the step's last transition when it was classified: a
	// decision applies only while the step is still there (RecordAt).
	Seq uint64 `json:"seq"`
}

// PlanMandate is a mandate's line of a plan.
type PlanMandate struct {
	MandateID string `json:"mandate_id"`
	Name      string `json:"name,omitempty"`
	Status    string `json:"status"`
	LastTS    int64  `json:"last_ts"`
	// Resume is the automatic decision at daemon start ("auto_resume",
	// "wait_for_operator") with its Reason; empty when none was taken.
	Resume string `json:"resume,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Result of an automatic resume.
	ResumeError string `json:"resume_error,omitempty"`
}

// Plan is the outcome of classifying every step (SPEC §8 steps 3–5).
type Plan struct {
	Steps    []PlanStep    `json:"steps"`
	Mandates []PlanMandate `json:"mandates"`
	// ClosedTerminal lists the terminal blocks and sessions closed because
	// the crash left them open.
	ClosedTerminal []string `json:"closed_terminal,omitempty"`
	// Applied counts the events appended by Apply.
	Applied int `json:"applied"`
	// Salvaged lists sequence numbers lost to corruption and replaced by
	// wal.salvaged placeholders (recover --salvage).
	Salvaged []SalvagedEntry `json:"salvaged,omitempty"`
	// Hidden counts the steps left out of Steps by NeedsAttention.
	Hidden int `json:"hidden,omitempty"`
}

// SalvagedEntry is one lost entry reported by a salvage.
type SalvagedEntry struct {
	Seq   uint64 `json:"seq"`
	Where string `json:"where"`
	Guess string `json:"guess,omitempty"`
}

// PlanOptions configure BuildPlan.
type PlanOptions struct {
	// UnderDaemon: the plan is built by a running daemon, and steps whose
	// last transition is after LiveAfter (the seq its journal started at,
	// 0 for an empty log) belong to runners of its lifetime and are not
	// acted on — unless the step names its runner and that runner is gone.
	// False: act on all (no daemon runs).
	UnderDaemon bool
	LiveAfter   uint64
	// Hash computes a step's world hash now; default WorldHash of its
	// world ("" for a step without one).
	Hash func(s *steps.StepState) (string, error)
	// Running tells whether a recorded process (a step's, or its
	// runner's) still runs; default steps.Process.Running. An error counts
	// as running: a step is never retried on a guess.
	Running func(p steps.Process) (bool, error)
	// LiveMember names the process that keeps a recorded one running (its
	// own pid, or a live member of its group); default
	// steps.Process.LiveMember.
	LiveMember func(p steps.Process) (int, error)
}

// AwaitsReview reports whether the step waits for a human: it is marked
// needs_review or about to be. A failed step's recorded failure is an
// outcome, not a question.
func (s PlanStep) AwaitsReview() bool {
	return s.Verdict == ManualReview && (s.Status == events.StatusNeedsReview || s.Action == ActionNeedsReview)
}

// NeedsReview reports whether some step awaits a human (exit code 4).
func (p *Plan) NeedsReview() bool { return p.AwaitingReview() > 0 }

// InFlight returns the steps whose process still runs (verdict in_flight).
func (p *Plan) InFlight() []PlanStep {
	var out []PlanStep
	for _, s := range p.Steps {
		if s.Verdict == InFlight {
			out = append(out, s)
		}
	}
	return out
}

// AwaitingReview counts the steps that await a human.
func (p *Plan) AwaitingReview() int {
	n := 0
	for _, s := range p.Steps {
		if s.AwaitsReview() {
			n++
		}
	}
	return n
}

// Pending counts the steps with an action to apply.
func (p *Plan) Pending() int {
	n := 0
	for _, s := range p.Steps {
		if s.Action != ActionNone {
			n++
		}
	}
	return n
}

// BuildPlan classifies every step of mandates with world hashes computed
// now and picks an action for each:
//
//	status        verdict         action
//	executing     already_done    complete (recovered, with the evidence)
//	executing     safe_to_retry   reset (same idem_key)
//	executing     manual_review   needs_review
//	pending       already_done    complete (the world shows it done)
//	pending       manual_review   needs_review
//	any           in_flight       none (its process still runs: wait for it)
//	anything else                 none
//
// A failed step keeps its recorded failure (re-running it is the
// operator's call: `cmlab run` retries failed steps).
func BuildPlan(mandates []*steps.MandateState, opts PlanOptions) *Plan {
	if opts.Hash == nil {
		opts.Hash = (*steps.StepState).CurrentWorldHash
	}
	if opts.Running == nil {
		opts.Running = steps.Process.Running
	}
	if opts.LiveMember == nil {
		opts.LiveMember = steps.Process.LiveMember
	}
	p := &Plan{Steps: []PlanStep{}, Mandates: []PlanMandate{}}
	for _, m := range mandates {
		pm := PlanMandate{MandateID: m.MandateID, Name: m.Name, Status: m.Status, LastTS: m.LastTS}
		if m.LastAuto != nil {
			pm.Resume, pm.Reason = m.LastAuto.Action, m.LastAuto.Reason
		}
		p.Mandates = append(p.Mandates, pm)
		for _, s := range m.Steps {
			ps := PlanStep{MandateID: m.MandateID, StepID: s.StepID, Status: s.Status, Action: ActionNone, Pid: s.Pid, Seq: s.LastSeq}
			var cur string
			running := false
			if s.Status != events.StatusCompleted {
				h, err := opts.Hash(s)
				if err != nil {
					ps.Note = "world not hashable: " + err.Error()
				}
				cur = h
				if s.Pid > 0 {
					r, err := opts.Running(s.Process())
					running = r || err != nil
				}
			}
			ps.Current = cur
			v := Classify(*s, cur, cur, running)
			ps.Verdict, ps.Evidence = v.Kind, v.Evidence
			if v.Kind == AlreadyDone && v.Evidence.Reason == ReasonCurrentMatchesPost {
				ps.Evidence.PostHash = v.PostHash
			}
			// Under a running daemon, a step its runners moved (or, for a
			// pending step, a mandate they are moving) is not a crash's —
			// unless the step names its runner and that runner is gone
			// (a killed `cmlab run`): then it is.
			live := opts.UnderDaemon && s.LastSeq > opts.LiveAfter
			if live && s.Status == events.StatusExecuting && s.RunnerPid > 0 {
				r, err := opts.Running(s.Runner())
				live = r || err != nil
			}
			liveMandate := opts.UnderDaemon && m.LastSeq > opts.LiveAfter
			switch {
			case v.Kind == InFlight:
				ps.Note = fmt.Sprintf("pid %d still runs: wait for it (recover --apply --wait) or stop it", s.Pid)
				nameLiveMember(&ps, s, opts.LiveMember)
			case s.Orphan:
				ps.Note = "orphan transition (no plan names this step)"
			case live && s.Status == events.StatusExecuting:
				ps.Note = "in progress under the running daemon"
			case liveMandate && s.Status == events.StatusPending && v.Kind != SafeToRetry:
				ps.Note = "mandate in progress under the running daemon"
			case s.Status == events.StatusFailed:
				ps.ErrorClass = s.ErrorClass
				ps.Note = "failed cleanly: `cmlab run` retries it, or `cmlab step reset` then run it"
			case s.Status == events.StatusExecuting:
				ps.Action = map[string]string{AlreadyDone: ActionComplete, SafeToRetry: ActionReset, ManualReview: ActionNeedsReview}[v.Kind]
			case s.Status == events.StatusPending && v.Kind == AlreadyDone:
				ps.Action = ActionComplete
			case s.Status == events.StatusPending && v.Kind == ManualReview:
				ps.Action = ActionNeedsReview
			}
			p.Steps = append(p.Steps, ps)
		}
	}
	return p
}

// Decision turns a plan line into the transition it applies (nil for none).
func (s PlanStep) Decision() events.Payload {
	ev := s.Evidence
	switch s.Action {
	case ActionComplete:
		post := s.Evidence.PostHash
		if post == "" {
			post = s.Current
		}
		return &events.StepCompleted{MandateID: s.MandateID, StepID: s.StepID, PostHash: post, Recovered: true, Evidence: &ev}
	case ActionReset:
		return &events.StepReset{MandateID: s.MandateID, StepID: s.StepID, Reason: s.Evidence.Reason, Evidence: &ev}
	case ActionNeedsReview:
		return &events.StepNeedsReview{MandateID: s.MandateID, StepID: s.StepID, Reason: s.Evidence.Reason, Evidence: &ev}
	}
	return nil
}

// ApplyOptions configure Apply.
type ApplyOptions struct {
	// Auto marks decisions taken by daemon start rather than the operator.
	Auto bool
	// Only, when set, limits the applied steps to these mandates.
	Only map[string]bool
	// Extra decisions to record in recovery.applied (auto-resume choices).
	Extra []events.RecoveryDecision
	// Req, when set, is the request id the recovery.applied event carries,
	// with ReqHash and the response snapshot Snapshot returns (called with
	// the plan as it is once that event is appended), so that a retry of
	// the request is answered from the log (POST /api/recovery/apply).
	Req, ReqHash string
	Snapshot     func(*Plan) (json.RawMessage, error)
}

// Apply appends the plan's decisions through j, each only while its step
// is still at the transition it was classified at (Journal.RecordAt: a
// step that moved meanwhile fails the apply with steps.ErrStale), then one
// recovery.applied event listing them. With nothing to apply it appends nothing, so a second
// run is a no-op. It returns the number of events appended.
func Apply(ctx context.Context, j *steps.Journal, p *Plan, opts ApplyOptions) (int, error) {
	var decisions []events.RecoveryDecision
	n := 0
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Action == ActionNone || (opts.Only != nil && !opts.Only[s.MandateID]) {
			continue
		}
		d := s.Decision()
		if err := j.RecordAt(ctx, d, s.Seq); err != nil {
			return n, fmt.Errorf("recovery: applying %s to %s/%s: %w", s.Action, s.MandateID, s.StepID, err)
		}
		n++
		ev := s.Evidence
		decisions = append(decisions, events.RecoveryDecision{MandateID: s.MandateID, StepID: s.StepID,
			Status: s.Status, Verdict: s.Verdict, Evidence: &ev, Action: s.Action})
	}
	decisions = append(decisions, opts.Extra...)
	if len(decisions) == 0 {
		p.Applied += n
		return n, nil
	}
	ev, err := events.New("recovery", &events.RecoveryApplied{Decisions: decisions, Auto: opts.Auto})
	if err != nil {
		return n, err
	}
	if opts.Req != "" && opts.Snapshot != nil {
		p.Applied += n + 1 // as it will be once ev is appended
		snap, err := opts.Snapshot(p)
		p.Applied -= n + 1
		if err != nil {
			return n, err
		}
		ev.WithRequest(opts.Req, opts.ReqHash, snap)
	}
	if _, err := j.Engine().Append(ctx, ev); err != nil {
		return n, err
	}
	n++
	p.Applied += n
	return n, nil
}

// WriteTable prints the plan as a table.
func (p *Plan) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if len(p.Steps) > 0 || p.Hidden == 0 {
		fmt.Fprintln(tw, "MANDATE\tSTEP\tSTATUS\tVERDICT\tEVIDENCE\tACTION")
	}
	for _, s := range p.Steps {
		action := s.Action
		if s.Note != "" {
			action += " (" + s.Note + ")"
		}
		verdict, reason := s.Verdict, s.Evidence.Reason
		if s.Status == events.StatusFailed && s.Verdict != InFlight {
			// A recorded failure is not an interruption: say what was recorded.
			verdict, reason = "failed", "error_class="+orNone(s.ErrorClass)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.MandateID, s.StepID, s.Status, verdict, reason, action)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range p.Mandates {
		if m.Resume == "" {
			continue
		}
		line := fmt.Sprintf("mandate %s: %s", m.MandateID, m.Resume)
		if m.Reason != "" {
			line += " (" + m.Reason + ")"
		}
		if m.ResumeError != "" {
			line += ": " + m.ResumeError
		}
		fmt.Fprintln(w, line)
	}
	for _, s := range p.InFlight() {
		fmt.Fprintf(w, "in flight: %s/%s: pid %d still runs; nothing is decided about it until it ends (recover --apply --wait waits)\n", s.MandateID, s.StepID, s.Pid)
	}
	if len(p.ClosedTerminal) > 0 {
		fmt.Fprintf(w, "closed after the crash: %s\n", strings.Join(p.ClosedTerminal, ", "))
	}
	for _, s := range p.Salvaged {
		line := fmt.Sprintf("salvaged: seq %d lost at %s", s.Seq, s.Where)
		if s.Guess != "" {
			line += " (" + s.Guess + ")"
		}
		fmt.Fprintln(w, line)
	}
	switch {
	case p.Hidden > 0:
		fmt.Fprintf(w, "%d completed step(s) not shown (nothing to do for them): --all lists them\n", p.Hidden)
	case len(p.Steps) == 0:
		fmt.Fprintln(w, "no steps recorded")
	}
	switch {
	case p.Applied > 0:
		fmt.Fprintf(w, "applied: %d event(s) appended\n", p.Applied)
	case p.Pending() > 0:
		fmt.Fprintf(w, "%d decision(s) to apply: run again with --apply\n", p.Pending())
	default:
		fmt.Fprintln(w, "nothing to apply")
	}
	return nil
}

// JSON is the plan as indented JSON.
func (p *Plan) JSON() ([]byte, error) { return json.MarshalIndent(p, "", "  ") }

// orNone is v, or "none" when it is empty.
func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

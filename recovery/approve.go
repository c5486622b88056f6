package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/steps"
)

// ReasonOperatorApproved is the evidence reason of a step an operator
// approved (Approve): "the side effect happened, as planned".
const ReasonOperatorApproved = "operator_approved"

// ErrNoWorld: the step's plan declares no world paths, so the daemon
// cannot take its world hash for the operator.
var ErrNoWorld = errors.New("the step's plan declares no world paths")

// ApproveOptions configure Approve; zero values take the real world.
type ApproveOptions struct {
	// Note is the operator's words, kept in the evidence's detail.
	Note string
	// Req and ReqHash: the request id the event carries (a retry is
	// answered from the log).
	Req, ReqHash string
	// Hash computes the step's world hash now (default
	// StepState.CurrentWorldHash); Running whether its process still runs
	// (default steps.Process.Running).
	Hash    func(*steps.StepState) (string, error)
	Running func(steps.Process) (bool, error)
}

// Approve settles a step an operator has checked by hand: its side effect
// happened, as planned. The operator types no hash: the world hash is
// taken now, here (the daemon's view of the step's declared world), and
// recorded as the step's post hash in step.completed (recovered: true),
// with evidence naming the approval, the step's status before it, the
// world hash and the plan's expected_post_hash, and the operator's note.
//
// Only a step that is executing (interrupted) or in review can be
// approved; never one whose recorded process still runs (in_flight:
// whatever the world shows, the process may still change it), and never
// one whose plan declares no world (ErrNoWorld: there is nothing to hash;
// `cmlab step complete --post` takes a hash instead). The record is made
// only while the step is still at the transition it was checked at
// (steps.ErrStale otherwise), through the daemon's one journal.
func Approve(ctx context.Context, j *steps.Journal, mandate, step string, o ApproveOptions) (steps.TransitionResponse, error) {
	if o.Hash == nil {
		o.Hash = (*steps.StepState).CurrentWorldHash
	}
	if o.Running == nil {
		o.Running = steps.Process.Running
	}
	m := j.State().Mandate(mandate)
	if m == nil || m.Orphan {
		return steps.TransitionResponse{}, fmt.Errorf("%w: %s", steps.ErrUnknownMandate, mandate)
	}
	s := m.Step(step)
	if s == nil || s.Orphan {
		return steps.TransitionResponse{}, fmt.Errorf("%w: %s has no step %s", steps.ErrUnknownStep, mandate, step)
	}
	if s.Status != events.StatusExecuting && s.Status != events.StatusNeedsReview {
		return steps.TransitionResponse{}, fmt.Errorf("%w: step %s/%s is %s; only an executing (interrupted) or in-review step can be approved",
			steps.ErrInvalidTransition, mandate, step, s.Status)
	}
	if s.Pid > 0 {
		running, err := o.Running(s.Process())
		if err != nil || running {
			return steps.TransitionResponse{}, fmt.Errorf("%w: pid %d of %s/%s still runs: wait for it or stop it before approving", steps.ErrInFlight, s.Pid, mandate, step)
		}
	}
	if len(s.World) == 0 {
		return steps.TransitionResponse{}, fmt.Errorf("%w: %s/%s", ErrNoWorld, mandate, step)
	}
	h, err := o.Hash(s)
	if err != nil {
		return steps.TransitionResponse{}, fmt.Errorf("hashing the world of %s/%s: %w", mandate, step, err)
	}
	ev := events.Evidence{Reason: ReasonOperatorApproved, Status: s.Status, CurrentPostHash: h,
		PostHash: s.ExpectedPostHash, ObservedPreHash: s.ObservedPreHash, Detail: o.Note}
	p := &events.StepCompleted{MandateID: mandate, StepID: step, PostHash: h, Recovered: true, Evidence: &ev}
	return j.RecordRequestAt(ctx, p, s.LastSeq, o.Req, o.ReqHash)
}

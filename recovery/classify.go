package recovery

import (
	"fmt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/steps"
)

// Verdict kinds (seed 002, and in_flight: ours).
const (
	AlreadyDone  = "already_done"
	SafeToRetry  = "safe_to_retry"
	ManualReview = "manual_review"
	// InFlight: the step's recorded process (same pid and start time), or
	// a process of its process group, still runs; nothing may be decided
	// about it until it is gone.
	InFlight = "in_flight"
)

// Evidence reasons (seed 002, verbatim).
const (
	ReasonWALRecordedCompletion    = "wal_recorded_completion"
	ReasonCurrentMatchesPost       = "current_state_matches_expected_post"
	ReasonExplicitlyNeedsReview    = "explicitly_marked_needs_review"
	ReasonNeverReachedExecuting    = "never_reached_executing"
	ReasonCurrentPreMatches        = "current_pre_matches_expected"
	ReasonInterruptedDuringExecute = "interrupted_during_execution"
	// ReasonProcessRunning is the evidence of in_flight (ours).
	ReasonProcessRunning = "process_still_running"
)

// Verdict is what recovery decides about one step.
type Verdict struct {
	Kind     string          `json:"kind"`
	PostHash string          `json:"post_hash,omitempty"`
	Evidence events.Evidence `json:"evidence"`
}

// Classify decides whether step's side effects landed (already_done), can
// safely be redone (safe_to_retry) or need a human (manual_review). It is
// the classifier of seed 002 rule for rule, in its priority order, with one
// rule of ours after the first:
//
//  1. a recorded completion (post_hash present) → already_done
//     1b. the step's recorded process still runs (running) → in_flight,
//     naming the pid: whatever the world shows now, the process may
//     still change it, so it is neither done nor safe to retry
//  2. the world now equals expected_post_hash → already_done
//  3. status needs_review → manual_review (an explicit mark is never undone)
//  4. no executing was ever recorded and status is not executing/completed
//     → safe_to_retry
//  5. the world now equals pre_hash → safe_to_retry
//  6. anything else → manual_review
//
// currentPre and currentPost are world hashes computed at recovery time; ""
// means unknown, and the verdict is then decided from the log alone.
// running is whether step.Process() still runs (steps.Process.Running),
// computed by the caller: Classify does no I/O.
func Classify(step steps.StepState, currentPre, currentPost string, running bool) Verdict {
	if step.PostHash != "" {
		return Verdict{Kind: AlreadyDone, PostHash: step.PostHash,
			Evidence: events.Evidence{Reason: ReasonWALRecordedCompletion, ResultHash: step.ResultHash}}
	}
	if running {
		return Verdict{Kind: InFlight, Evidence: events.Evidence{Reason: ReasonProcessRunning, Status: step.Status, Pid: step.Pid,
			Detail: fmt.Sprintf("pid %d (started at tick %d after boot) still runs", step.Pid, step.PidStart)}}
	}
	if step.ExpectedPostHash != "" && currentPost != "" && currentPost == step.ExpectedPostHash {
		return Verdict{Kind: AlreadyDone, PostHash: currentPost,
			Evidence: events.Evidence{Reason: ReasonCurrentMatchesPost}}
	}
	status := step.Status
	if status == events.StatusNeedsReview {
		return Verdict{Kind: ManualReview,
			Evidence: events.Evidence{Reason: ReasonExplicitlyNeedsReview, Status: status}}
	}
	if step.ObservedPreHash == "" && status != events.StatusExecuting && status != events.StatusCompleted {
		return Verdict{Kind: SafeToRetry,
			Evidence: events.Evidence{Reason: ReasonNeverReachedExecuting, Status: status}}
	}
	if step.PreHash != "" && currentPre != "" && currentPre == step.PreHash {
		return Verdict{Kind: SafeToRetry,
			Evidence: events.Evidence{Reason: ReasonCurrentPreMatches}}
	}
	return Verdict{Kind: ManualReview, Evidence: events.Evidence{
		Reason:          ReasonInterruptedDuringExecute,
		Status:          status,
		ObservedPreHash: step.ObservedPreHash,
		ExpectedPreHash: step.PreHash,
	}}
}

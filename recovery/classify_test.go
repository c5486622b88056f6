package recovery

import (
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/steps"
)

func h(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return "sha256-" + string(b)
}

func TestClassify(t *testing.T) {
	pre, post, other, obs, res := h('1'), h('2'), h('3'), h('4'), h('5')
	tests := []struct {
		name        string
		step        steps.StepState
		curPre, cur string
		want        Verdict
	}{
		{"wal recorded completion", steps.StepState{Status: events.StatusCompleted, PostHash: post, ResultHash: res, ObservedPreHash: obs}, other, other,
			Verdict{Kind: AlreadyDone, PostHash: post, Evidence: events.Evidence{Reason: "wal_recorded_completion", ResultHash: res}}},
		{"current state matches expected post", steps.StepState{Status: events.StatusExecuting, PreHash: pre, ExpectedPostHash: post, ObservedPreHash: obs}, post, post,
			Verdict{Kind: AlreadyDone, PostHash: post, Evidence: events.Evidence{Reason: "current_state_matches_expected_post"}}},
		{"explicitly marked needs review", steps.StepState{Status: events.StatusNeedsReview, PreHash: pre, ObservedPreHash: obs}, pre, pre,
			Verdict{Kind: ManualReview, Evidence: events.Evidence{Reason: "explicitly_marked_needs_review", Status: "needs_review"}}},
		{"never reached executing (pending)", steps.StepState{Status: events.StatusPending, PreHash: pre}, other, other,
			Verdict{Kind: SafeToRetry, Evidence: events.Evidence{Reason: "never_reached_executing", Status: "pending"}}},
		{"never reached executing (failed)", steps.StepState{Status: events.StatusFailed, PreHash: pre}, other, other,
			Verdict{Kind: SafeToRetry, Evidence: events.Evidence{Reason: "never_reached_executing", Status: "failed"}}},
		{"current pre matches expected", steps.StepState{Status: events.StatusExecuting, PreHash: pre, ExpectedPostHash: post, ObservedPreHash: obs}, pre, pre,
			Verdict{Kind: SafeToRetry, Evidence: events.Evidence{Reason: "current_pre_matches_expected"}}},
		{"interrupted during execution", steps.StepState{Status: events.StatusExecuting, PreHash: pre, ObservedPreHash: obs}, other, other,
			Verdict{Kind: ManualReview, Evidence: events.Evidence{Reason: "interrupted_during_execution", Status: "executing", ObservedPreHash: obs, ExpectedPreHash: pre}}},
		// Priority cases.
		{"recorded completion beats current hashes", steps.StepState{Status: events.StatusCompleted, PostHash: post, ResultHash: res, PreHash: pre, ExpectedPostHash: other}, pre, pre,
			Verdict{Kind: AlreadyDone, PostHash: post, Evidence: events.Evidence{Reason: "wal_recorded_completion", ResultHash: res}}},
		{"recorded post hash wins even if status was later reviewed", steps.StepState{Status: events.StatusNeedsReview, PostHash: post}, "", "",
			Verdict{Kind: AlreadyDone, PostHash: post, Evidence: events.Evidence{Reason: "wal_recorded_completion"}}},
		{"expected post beats needs_review", steps.StepState{Status: events.StatusNeedsReview, ExpectedPostHash: post, ObservedPreHash: obs}, post, post,
			Verdict{Kind: AlreadyDone, PostHash: post, Evidence: events.Evidence{Reason: "current_state_matches_expected_post"}}},
		{"needs_review beats never_reached_executing", steps.StepState{Status: events.StatusNeedsReview, PreHash: pre}, pre, pre,
			Verdict{Kind: ManualReview, Evidence: events.Evidence{Reason: "explicitly_marked_needs_review", Status: "needs_review"}}},
		{"expected post beats current pre", steps.StepState{Status: events.StatusExecuting, PreHash: post, ExpectedPostHash: post, ObservedPreHash: obs}, post, post,
			Verdict{Kind: AlreadyDone, PostHash: post, Evidence: events.Evidence{Reason: "current_state_matches_expected_post"}}},
		{"executing without observed pre is not never_reached", steps.StepState{Status: events.StatusExecuting, PreHash: pre}, other, other,
			Verdict{Kind: ManualReview, Evidence: events.Evidence{Reason: "interrupted_during_execution", Status: "executing", ExpectedPreHash: pre}}},
		{"reset step keeps observed pre: judged by current pre", steps.StepState{Status: events.StatusPending, PreHash: pre, ObservedPreHash: obs}, pre, pre,
			Verdict{Kind: SafeToRetry, Evidence: events.Evidence{Reason: "current_pre_matches_expected"}}},
		{"unknown current hashes decide from the log alone", steps.StepState{Status: events.StatusExecuting, PreHash: pre, ExpectedPostHash: post, ObservedPreHash: obs}, "", "",
			Verdict{Kind: ManualReview, Evidence: events.Evidence{Reason: "interrupted_during_execution", Status: "executing", ObservedPreHash: obs, ExpectedPreHash: pre}}},
		{"empty expected post never matches", steps.StepState{Status: events.StatusExecuting, ObservedPreHash: obs}, "", "",
			Verdict{Kind: ManualReview, Evidence: events.Evidence{Reason: "interrupted_during_execution", Status: "executing", ObservedPreHash: obs}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.step, tc.curPre, tc.cur, false)
			if got != tc.want {
				t.Fatalf("Classify = %+v\nwant       %+v", got, tc.want)
			}
		})
	}
}

// TestClassifyInFlight: while the step's recorded process runs, no rule
// but a recorded completion decides: the world may still change.
func TestClassifyInFlight(t *testing.T) {
	pre, post, obs, res := h('1'), h('2'), h('4'), h('5')
	inFlight := func(status string) Verdict {
		return Verdict{Kind: InFlight, Evidence: events.Evidence{Reason: ReasonProcessRunning, Status: status, Pid: 4242,
			Detail: "pid 4242 (started at tick 99 after boot) still runs"}}
	}
	tests := []struct {
		name        string
		step        steps.StepState
		curPre, cur string
		want        Verdict
	}{
		{"beats current pre matches", steps.StepState{Status: events.StatusExecuting, PreHash: pre, ObservedPreHash: obs, Pid: 4242, PidStart: 99}, pre, pre, inFlight("executing")},
		{"beats current post matches", steps.StepState{Status: events.StatusExecuting, PreHash: pre, ExpectedPostHash: post, ObservedPreHash: obs, Pid: 4242, PidStart: 99}, post, post, inFlight("executing")},
		{"beats a reset by hand", steps.StepState{Status: events.StatusPending, PreHash: pre, ObservedPreHash: obs, Pid: 4242, PidStart: 99}, pre, pre, inFlight("pending")},
		{"beats needs_review", steps.StepState{Status: events.StatusNeedsReview, PreHash: pre, ObservedPreHash: obs, Pid: 4242, PidStart: 99}, pre, pre, inFlight("needs_review")},
		{"a recorded completion beats it", steps.StepState{Status: events.StatusCompleted, PostHash: post, ResultHash: res, Pid: 4242, PidStart: 99}, pre, pre,
			Verdict{Kind: AlreadyDone, PostHash: post, Evidence: events.Evidence{Reason: "wal_recorded_completion", ResultHash: res}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.step, tc.curPre, tc.cur, true); got != tc.want {
				t.Fatalf("Classify = %+v\nwant       %+v", got, tc.want)
			}
		})
	}
}

package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
)

// ErrNoMandate is returned when the log holds no transition of a mandate.
var ErrNoMandate = errors.New("replay: no such mandate in the log")

// World sources: where a what-if took the "current" world hash from.
const (
	// WorldRecorded: the last world hash the log recorded for the step at
	// that point (its post_hash once completed, else its observed_pre_hash).
	WorldRecorded = "recorded"
	// WorldUnknown: the log recorded no world hash for the step yet; the
	// classifier decides from the log alone.
	WorldUnknown = "unknown"
	// WorldSideEffectLanded: hypothesis for a step caught executing — its
	// side effect completed (the world equals expected_post_hash) but the
	// completion was never logged.
	WorldSideEffectLanded = "side_effect_landed"
)

// StepVerdict is what recovery would decide about one step.
type StepVerdict struct {
	StepID      string           `json:"step_id"`
	Status      string           `json:"status"`
	Verdict     recovery.Verdict `json:"verdict"`
	World       string           `json:"world"` // WorldRecorded | WorldUnknown | WorldSideEffectLanded
	CurrentPre  string           `json:"current_pre_hash,omitempty"`
	CurrentPost string           `json:"current_post_hash,omitempty"`
}

// WhatIfPoint is the mandate right after one of its transitions.
type WhatIfPoint struct {
	Seq    uint64 `json:"seq"`
	TS     int64  `json:"ts"`
	Type   string `json:"type"`
	StepID string `json:"step_id,omitempty"` // the step the transition moved ("" for a plan)
	// Steps are the verdicts of every step of the mandate at this point,
	// in plan order, with the world as recorded in the log.
	Steps []StepVerdict `json:"steps"`
	// Landed, for a transition that left a step executing: the verdict had
	// the step's side effect landed before the crash. When it differs
	// from the recorded-world verdict, the point is fragile.
	Landed *StepVerdict `json:"landed,omitempty"`
	// Fragile is true when a crash here needs a human (some step would
	// be manual_review under one of the hypotheses).
	Fragile bool `json:"fragile"`
}

// WhatIfResult is the what-if analysis of one mandate.
type WhatIfResult struct {
	MandateID string        `json:"mandate_id"`
	Points    []WhatIfPoint `json:"points"`
}

// WhatIf replays the step transitions of mandateID and, after each one,
// asks recovery.Classify what it would decide about every step had the
// process died right then. The current world hashes are those the log had
// recorded for each step at that point (see WorldRecorded); for a step left
// executing the alternative in which its side effect landed is classified too.
func WhatIf(ctx context.Context, log *Log, mandateID string) (*WhatIfResult, error) {
	st := steps.NewState()
	res := &WhatIfResult{MandateID: mandateID, Points: []WhatIfPoint{}}
	for ev, err := range log.Events(ctx, 1, 0) {
		if err != nil {
			return nil, err
		}
		if !isStepEvent(ev.Type) {
			continue
		}
		st.Observe(ev)
		p, err := ev.Decode()
		if err != nil {
			continue
		}
		mid, sid := steps.StepTarget(p)
		if mid == "" {
			mid = ev.Stream
		}
		if mid != mandateID {
			continue
		}
		m := st.Mandate(mandateID)
		if m == nil {
			continue
		}
		pt := WhatIfPoint{Seq: ev.Seq, TS: ev.TS, Type: ev.Type, StepID: sid}
		for _, s := range m.Steps {
			v := classifyRecorded(s)
			pt.Steps = append(pt.Steps, v)
			if v.Verdict.Kind == recovery.ManualReview {
				pt.Fragile = true
			}
			if s.StepID == sid && s.Status == events.StatusExecuting {
				l := classifyLanded(s)
				pt.Landed = &l
				if l.Verdict.Kind == recovery.ManualReview {
					pt.Fragile = true
				}
			}
		}
		res.Points = append(res.Points, pt)
	}
	if len(res.Points) == 0 {
		return res, fmt.Errorf("%w: %s", ErrNoMandate, mandateID)
	}
	return res, nil
}

func isStepEvent(t string) bool {
	switch t {
	case events.TypeStepPlanned, events.TypeStepExecuting, events.TypeStepCompleted,
		events.TypeStepFailed, events.TypeStepNeedsReview, events.TypeStepReset:
		return true
	}
	return false
}

// recordedWorld is the last world hash the log holds for s.
func recordedWorld(s *steps.StepState) string {
	if s.PostHash != "" {
		return s.PostHash
	}
	return s.ObservedPreHash
}

func classifyRecorded(s *steps.StepState) StepVerdict {
	w := recordedWorld(s)
	v := StepVerdict{StepID: s.StepID, Status: s.Status, World: WorldRecorded, CurrentPre: w, CurrentPost: w}
	if w == "" {
		v.World, v.CurrentPre, v.CurrentPost = WorldUnknown, "", ""
	}
	v.Verdict = recovery.Classify(*s, v.CurrentPre, v.CurrentPost, false)
	return v
}

func classifyLanded(s *steps.StepState) StepVerdict {
	// The world moved from the observed pre-state to the expected post-state;
	// without an expected_post_hash its hash is unknown, but it is no longer
	// the pre-state, so neither current hash can match anything.
	w := s.ExpectedPostHash
	v := StepVerdict{StepID: s.StepID, Status: s.Status, World: WorldSideEffectLanded, CurrentPost: w}
	v.Verdict = recovery.Classify(*s, "", w, false)
	return v
}

package recovery

import (
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/steps"
)

func evAt(seq uint64, stream string, p events.Payload) *events.Event {
	ev := events.MustNew(stream, p)
	ev.Seq, ev.TS = seq, int64(seq)*1000
	return ev
}

func TestBuildPlanLeavesLiveStepsAlone(t *testing.T) {
	pre, obs := h('1'), h('4')
	evs := []*events.Event{
		evAt(1, "m1", &events.StepPlanned{MandateID: "m1", Steps: []events.PlannedStep{
			{StepID: "old", Tool: "sh", ParamsHash: h('9'), PreHash: pre, IdemKey: "k1"},
			{StepID: "new", Tool: "sh", ParamsHash: h('8'), PreHash: pre, IdemKey: "k2"},
		}}),
		evAt(2, "m1", &events.StepExecuting{MandateID: "m1", StepID: "old", ObservedPreHash: obs}),
		evAt(3, "m1", &events.StepExecuting{MandateID: "m1", StepID: "new", ObservedPreHash: obs}),
	}
	s := steps.Rebuild(evs)
	hash := func(*steps.StepState) (string, error) { return pre, nil }
	p := BuildPlan(s.Mandates(), PlanOptions{UnderDaemon: true, LiveAfter: 2, Hash: hash})
	if p.Steps[0].Action != ActionReset || p.Steps[1].Action != ActionNone || p.Steps[1].Note == "" {
		t.Fatalf("plan %+v", p.Steps)
	}
	p = BuildPlan(s.Mandates(), PlanOptions{Hash: hash})
	if p.Steps[0].Action != ActionReset || p.Steps[1].Action != ActionReset {
		t.Fatalf("plan without a daemon %+v", p.Steps)
	}
}

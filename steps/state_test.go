package steps

import (
	"testing"

	"github.com/cmlab/cmlab/events"
)

func evAt(seq uint64, stream string, p events.Payload) *events.Event {
	ev := events.MustNew(stream, p)
	ev.Seq, ev.TS = seq, int64(seq)*1000
	return ev
}

func TestRebuildFieldsSetNeverCleared(t *testing.T) {
	pre, post, obs, res := h('1'), h('2'), h('4'), h('5')
	code := 0
	evs := []*events.Event{
		evAt(1, "m1", &events.StepPlanned{MandateID: "m1", Name: "n", Steps: []events.PlannedStep{
			{StepID: "a", Tool: "sh", ParamsHash: h('9'), PreHash: pre, ExpectedPostHash: post, IdemKey: "k1"},
			{StepID: "b", Tool: "sh", ParamsHash: h('8'), IdemKey: "k2"},
		}}),
		evAt(2, "m1", &events.StepExecuting{MandateID: "m1", StepID: "a", IdemKey: "k1", ObservedPreHash: obs}),
		evAt(3, "m1", &events.StepReset{MandateID: "m1", StepID: "a", IdemKey: "k1", Reason: "current_pre_matches_expected"}),
		evAt(4, "m1", &events.StepExecuting{MandateID: "m1", StepID: "a", IdemKey: "k1"}),
		evAt(5, "m1", &events.StepCompleted{MandateID: "m1", StepID: "a", PostHash: post, ResultHash: res, ExitCode: &code}),
		evAt(6, "m1", &events.StepFailed{MandateID: "m1", StepID: "b", ErrorClass: "exit_status", ErrorMsg: "boom"}),
		evAt(7, "m1", &events.StepNeedsReview{MandateID: "m1", StepID: "b", Reason: "operator"}),
		// Orphans: an unknown step of a known mandate, and an unknown mandate.
		evAt(8, "m1", &events.StepExecuting{MandateID: "m1", StepID: "ghost", ObservedPreHash: obs}),
		evAt(9, "m2", &events.StepCompleted{MandateID: "m2", StepID: "x", PostHash: post, ResultHash: res}),
		evAt(10, "lab", &events.FeedbackSubmitted{}),
	}
	s := Rebuild(evs)
	m := s.Mandate("m1")
	if m == nil || m.Orphan || m.Name != "n" || m.PlannedSeq != 1 || m.LastSeq != 8 {
		t.Fatalf("m1 = %+v", m)
	}
	a := m.Step("a")
	if a.Status != "completed" || a.ObservedPreHash != obs || a.PostHash != post || a.ResultHash != res || a.IdemKey != "k1" ||
		a.Reason != "current_pre_matches_expected" || a.PreHash != pre || a.Transitions != 5 || a.ExitCode == nil || *a.ExitCode != 0 {
		t.Fatalf("step a = %+v", a)
	}
	b := m.Step("b")
	if b.Status != "needs_review" || b.ErrorClass != "exit_status" || b.ErrorMsg != "boom" || b.Reason != "operator" {
		t.Fatalf("step b = %+v", b)
	}
	g := m.Step("ghost")
	if g == nil || !g.Orphan || g.Status != "executing" || g.Index != 2 {
		t.Fatalf("ghost = %+v", g)
	}
	if m.Status != MandatePaused {
		t.Fatalf("m1 status %s", m.Status)
	}
	m2 := s.Mandate("m2")
	if m2 == nil || !m2.Orphan || len(m2.Steps) != 1 || !m2.Steps[0].Orphan || m2.Steps[0].Status != "completed" {
		t.Fatalf("m2 = %+v", m2)
	}
	if got := len(s.Mandates()); got != 2 {
		t.Fatalf("%d mandates", got)
	}
	// A plan arriving after orphan transitions adopts them.
	s.Observe(evAt(11, "m2", &events.StepPlanned{MandateID: "m2", Steps: []events.PlannedStep{{StepID: "x", Tool: "t", ParamsHash: h('7'), IdemKey: "kx"}}}))
	m2 = s.Mandate("m2")
	if m2.Orphan || m2.Steps[0].Orphan || m2.Steps[0].Status != "completed" || m2.Steps[0].IdemKey != "kx" || m2.Status != MandateCompleted {
		t.Fatalf("adopted m2 = %+v %+v", m2, m2.Steps[0])
	}
	// Copies are independent.
	m.Steps[0].Status = "mutated"
	if s.Mandate("m1").Step("a").Status != "completed" {
		t.Fatal("Mandate returned shared state")
	}
}

func TestCheckTransition(t *testing.T) {
	plan := &events.StepPlanned{MandateID: "m", Steps: []events.PlannedStep{{StepID: "a", Tool: "sh", ParamsHash: h('1'), IdemKey: "k"}}}
	s := Rebuild([]*events.Event{evAt(1, "m", plan)})
	m := s.Mandate("m")
	tests := []struct {
		name string
		p    events.Payload
		ok   bool
	}{
		{"replan", plan, false},
		{"executing", &events.StepExecuting{MandateID: "m", StepID: "a", ObservedPreHash: h('2')}, true},
		{"executing without observed pre", &events.StepExecuting{MandateID: "m", StepID: "a"}, false},
		{"executing bad hash", &events.StepExecuting{MandateID: "m", StepID: "a", ObservedPreHash: "sha256-xyz"}, false},
		{"executing wrong idem key", &events.StepExecuting{MandateID: "m", StepID: "a", IdemKey: "other", ObservedPreHash: h('2')}, false},
		{"complete a pending step", &events.StepCompleted{MandateID: "m", StepID: "a", PostHash: h('2'), ResultHash: h('3')}, false},
		{"recovered completion of a pending step", &events.StepCompleted{MandateID: "m", StepID: "a", PostHash: h('2'), Recovered: true}, true},
		{"unknown step", &events.StepExecuting{MandateID: "m", StepID: "zz", ObservedPreHash: h('2')}, false},
		{"unknown mandate", &events.StepExecuting{MandateID: "nope", StepID: "a", ObservedPreHash: h('2')}, false},
		{"fail pending", &events.StepFailed{MandateID: "m", StepID: "a", ErrorClass: "start"}, true},
		{"fail without class", &events.StepFailed{MandateID: "m", StepID: "a"}, false},
		{"review", &events.StepNeedsReview{MandateID: "m", StepID: "a", Reason: "r"}, true},
		{"reset pending", &events.StepReset{MandateID: "m", StepID: "a"}, false},
		{"bad mandate id", &events.StepExecuting{MandateID: "../x", StepID: "a", ObservedPreHash: h('2')}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTransition(m, tc.p)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckTransition = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	long := string(make([]rune, 0))
	for range 600 {
		long += "é"
	}
	f := &events.StepFailed{MandateID: "m", StepID: "a", ErrorClass: "x", ErrorMsg: long}
	Normalize(m, f)
	if n := len([]rune(f.ErrorMsg)); n != 500 {
		t.Fatalf("error_msg cut to %d characters", n)
	}
}

// h is a valid hash made of one repeated hex digit.
func h(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return "sha256-" + string(b)
}

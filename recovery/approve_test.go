package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

// TestApprove: an interrupted step is approved with the world hash taken
// now (no hash typed), recorded as step.completed (recovered) carrying
// the approval's evidence and the request id; a step that is not
// interrupted, one whose process runs, one without a world, and one that
// moved since are refused and append nothing.
func TestApprove(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(ctx, engine.Options{Home: home.Home{Dir: filepath.Join(dir, "home")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	j, err := steps.NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	world := filepath.Join(dir, "w")
	if err := os.MkdirAll(world, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(world, "out.txt"), []byte("done\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := steps.WorldHash(world, []string{"out.txt"})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(p events.Payload) {
		t.Helper()
		if err := j.Record(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	rec(&events.StepPlanned{MandateID: "m", Steps: []events.PlannedStep{
		{StepID: "a", Tool: "sh", ParamsHash: h('1'), IdemKey: "ka", World: []string{"out.txt"}, Dir: world, ExpectedPostHash: h('7')},
		{StepID: "b", Tool: "sh", ParamsHash: h('2'), IdemKey: "kb", World: []string{"out.txt"}, Dir: world},
		{StepID: "nw", Tool: "sh", ParamsHash: h('3'), IdemKey: "kc"},
	}})
	rec(&events.StepExecuting{MandateID: "m", StepID: "a", ObservedPreHash: h('4'), Pid: 4242, PidStart: 1})
	rec(&events.StepExecuting{MandateID: "m", StepID: "nw", ObservedPreHash: h('4')})
	notRunning := func(steps.Process) (bool, error) { return false, nil }
	running := func(steps.Process) (bool, error) { return true, nil }

	refusals := []struct {
		step    string
		running func(steps.Process) (bool, error)
		want    error
	}{
		{"b", notRunning, steps.ErrInvalidTransition}, // pending: nothing to approve
		{"a", running, steps.ErrInFlight},
		{"nw", notRunning, ErrNoWorld},
		{"zz", notRunning, steps.ErrUnknownStep},
	}
	last := eng.Log().LastSeq()
	for _, c := range refusals {
		if _, err := Approve(ctx, j, "m", c.step, ApproveOptions{Running: c.running}); !errors.Is(err, c.want) {
			t.Errorf("approve %s: %v, want %v", c.step, err, c.want)
		}
	}
	if _, err := Approve(ctx, j, "nope", "a", ApproveOptions{}); !errors.Is(err, steps.ErrUnknownMandate) {
		t.Errorf("unknown mandate: %v", err)
	}
	if eng.Log().LastSeq() != last {
		t.Fatal("a refused approval appended")
	}
	resp, err := Approve(ctx, j, "m", "a", ApproveOptions{Note: "checked by hand", Req: "req-approve", ReqHash: "rh", Running: notRunning})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != events.StatusCompleted || resp.StepID != "a" {
		t.Fatalf("response %+v", resp)
	}
	ev, err := eng.Log().Read(eng.Log().LastSeq())
	if err != nil {
		t.Fatal(err)
	}
	p, err := events.DecodeAs[*events.StepCompleted](ev)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Req != "req-approve" || p.PostHash != want || !p.Recovered || p.Evidence == nil ||
		p.Evidence.Reason != ReasonOperatorApproved || p.Evidence.Status != events.StatusExecuting ||
		p.Evidence.CurrentPostHash != want || p.Evidence.PostHash != h('7') || p.Evidence.Detail != "checked by hand" {
		t.Fatalf("recorded %+v evidence %+v req %q", p, p.Evidence, ev.Req)
	}
	if st := j.State().Mandate("m").Step("a"); st.Status != events.StatusCompleted || st.PostHash != want {
		t.Fatalf("state after approve: %+v", st)
	}
	// Approving again: completed is final.
	if _, err := Approve(ctx, j, "m", "a", ApproveOptions{Running: notRunning}); !errors.Is(err, steps.ErrInvalidTransition) {
		t.Fatalf("second approval: %v", err)
	}
}

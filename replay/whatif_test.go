package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
)

// crashMandate is the crash matrix's mandate: three steps, step i appends
// "si\n" to out<i>.txt, with or without expect_post.
func crashMandate(t *testing.T, dir string, expect bool) []byte {
	t.Helper()
	spec := `{"id":"m1","name":"three files","steps":[`
	for i := 1; i <= 3; i++ {
		if i > 1 {
			spec += ","
		}
		f := fmt.Sprintf("out%d.txt", i)
		spec += fmt.Sprintf(`{"id":"s%d","argv":["sh","-c","printf 's%d\\n' >> %s"],"env":["PATH"],"world":["%s"]`, i, i, f, f)
		if expect {
			spec += fmt.Sprintf(`,"expect_post":{"%s":"s%d\n"}`, f, i)
		}
		spec += "}"
	}
	spec += "]}"
	if err := os.WriteFile(filepath.Join(dir, "mandate.json"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return []byte(spec)
}

// stopRun is the panic value the hook uses to stop the runner at a crash
// point, leaving the log exactly as a SIGKILL there would.
type stopRun struct{}

// runUntil runs the mandate and stops it at point of step (point 0: runs it all).
func runUntil(t *testing.T, j *steps.Journal, work string, spec []byte, point steps.CrashPoint, step string) {
	t.Helper()
	m, err := steps.ParseMandate(spec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work, Hook: func(p steps.CrashPoint, s string) {
		if p == point && s == step {
			panic(stopRun{})
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(stopRun); !ok {
					panic(v)
				}
			}
		}()
		if _, err := r.Run(context.Background(), m, spec); err != nil {
			t.Fatal(err)
		}
		if point != 0 {
			t.Fatalf("the run passed crash point %s of %s", point, step)
		}
	}()
}

func verdictOf(t *testing.T, pt WhatIfPoint, step string) StepVerdict {
	t.Helper()
	for _, s := range pt.Steps {
		if s.StepID == step {
			return s
		}
	}
	t.Fatalf("point seq %d has no step %s", pt.Seq, step)
	return StepVerdict{}
}

// TestWhatIfMatchesCrashMatrix stops the crash matrix's mandate at each
// crash point of its middle step and checks that the what-if verdict at the
// last logged transition is the verdict recovery reaches on that log with
// the world as it really is — for the after-side-effect point, the
// "side effect landed" hypothesis of the executing transition.
func TestWhatIfMatchesCrashMatrix(t *testing.T) {
	for _, point := range []steps.CrashPoint{steps.BeforeExecuting, steps.AfterExecuting, steps.AfterSideEffect, steps.AfterCompleted} {
		for _, expect := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/expect_post=%v", point, expect), func(t *testing.T) {
				ctx := context.Background()
				work := t.TempDir()
				h := home.Home{Dir: t.TempDir()}
				eng, err := engine.Open(ctx, engine.Options{Home: h})
				if err != nil {
					t.Fatal(err)
				}
				defer eng.Close()
				j, err := steps.NewJournal(eng)
				if err != nil {
					t.Fatal(err)
				}
				runUntil(t, j, work, crashMandate(t, work, expect), point, "s2")
				plan := recovery.Recover(j, recovery.PlanOptions{})

				log, err := OpenLog(h.WALDir())
				if err != nil {
					t.Fatal(err)
				}
				res, err := WhatIf(ctx, log, "m1")
				if err != nil {
					t.Fatal(err)
				}
				last := res.Points[len(res.Points)-1]
				for _, ps := range plan.Steps {
					got := verdictOf(t, last, ps.StepID)
					if point == steps.AfterSideEffect && ps.StepID == "s2" {
						if last.Landed == nil || last.Landed.StepID != "s2" {
							t.Fatalf("last point %+v has no side-effect hypothesis for s2", last)
						}
						got = *last.Landed
					}
					if got.Verdict.Kind != ps.Verdict || got.Verdict.Evidence.Reason != ps.Evidence.Reason {
						t.Errorf("%s: what-if %s (%s), recovery observed %s (%s)", ps.StepID,
							got.Verdict.Kind, got.Verdict.Evidence.Reason, ps.Verdict, ps.Evidence.Reason)
					}
				}
				wantFragile := point == steps.AfterExecuting && !expect || point == steps.AfterSideEffect && !expect
				if last.Fragile != wantFragile {
					t.Errorf("fragile = %v, want %v", last.Fragile, wantFragile)
				}
			})
		}
	}
}

// TestWhatIfWholeRun lists one point per transition of a completed run.
func TestWhatIfWholeRun(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	j, err := steps.NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, j, work, crashMandate(t, work, true), 0, "")
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := OpenLog(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := WhatIf(ctx, log, "m1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{events.TypeStepPlanned,
		events.TypeStepExecuting, events.TypeStepCompleted,
		events.TypeStepExecuting, events.TypeStepCompleted,
		events.TypeStepExecuting, events.TypeStepCompleted}
	if len(res.Points) != len(want) {
		t.Fatalf("%d points, want %d: %+v", len(res.Points), len(want), res.Points)
	}
	for i, pt := range res.Points {
		if pt.Type != want[i] || len(pt.Steps) != 3 || pt.Fragile {
			t.Errorf("point %d: %s steps=%d fragile=%v", i, pt.Type, len(pt.Steps), pt.Fragile)
		}
	}
	final := res.Points[len(res.Points)-1]
	for _, s := range final.Steps {
		if s.Verdict.Kind != recovery.AlreadyDone || s.Verdict.Evidence.Reason != recovery.ReasonWALRecordedCompletion || s.World != WorldRecorded {
			t.Errorf("final %s: %+v", s.StepID, s)
		}
	}
	tr, err := Trace(ctx, log, "m1/s2")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, hit := range tr.Hits {
		types = append(types, hit.Event.Type)
	}
	if strings.Join(types, " ") != "step.planned step.executing step.completed" || tr.Hits[0].Via[0] != "data.steps[1].step_id=s2" {
		t.Fatalf("trace m1/s2: %v %v", types, tr.Hits[0].Via)
	}
	if _, err := Trace(ctx, log, "m2/s2"); err == nil {
		t.Fatal("trace of a step of an unknown mandate succeeded")
	}
	if _, err := WhatIf(ctx, log, "nope"); err == nil {
		t.Fatal("what-if of an unknown mandate succeeded")
	}
}

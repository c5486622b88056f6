package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

// waitUntil polls cond every 5 ms until it holds or 20 s pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestKilledRunnerNeverRepeatsASideEffect is the crash matrix of issue 14:
// a real runner (this test binary re-executed) is SIGKILLed at four points
// of a step — its process started at the gate but not recorded, recorded
// but still at the gate, sleeping before its write, and after its write —
// for three kinds of step; then recovery (waiting while the step's process
// runs), recover --apply and a second run. The world file must end with
// exactly one write in every case.
func TestKilledRunnerNeverRepeatsASideEffect(t *testing.T) {
	kinds := []struct {
		name, op string
		expect   bool
	}{
		{"append", ">>", false},            // not idempotent, nothing to recognise it by
		{"append_expect_post", ">>", true}, // not idempotent, its result known
		{"overwrite_expect_post", ">", true},
	}
	points := []struct {
		name string
		hook steps.CrashPoint // 0: the test kills the runner
		// before the kill (external points): what the step must have done.
		wrote bool
	}{
		{"before_start_recorded", steps.ChildStarted, false},
		{"after_start_recorded", steps.AfterExecuting, false},
		{"while_child_sleeps", 0, false},
		{"after_child_wrote", 0, true},
	}
	for _, k := range kinds {
		for _, pt := range points {
			t.Run(k.name+"/"+pt.name, func(t *testing.T) {
				ctx := context.Background()
				work, marks := t.TempDir(), t.TempDir()
				h := home.Home{Dir: t.TempDir()}
				q := func(name string) string { return "'" + filepath.Join(marks, name) + "'" }
				// The step: note its pid, sleep until `go`, write once,
				// note that, sleep until `go2`.
				script := "echo $$ > " + q("pid") + "; while [ ! -e " + q("go") + " ]; do sleep 0.01; done; echo w " + k.op + " out; : > " + q("wrote") +
					"; while [ ! -e " + q("go2") + " ]; do sleep 0.01; done"
				argv, _ := json.Marshal([]string{"sh", "-c", script})
				spec := `{"id":"m1","steps":[{"id":"s1","argv":` + string(argv) + `,"env":["PATH"],"world":["out"]`
				if k.expect {
					spec += `,"expect_post":{"out":"w\n"}`
				}
				spec += `}]}`
				writeFile(t, work, "mandate.json", spec)
				mp := filepath.Join(work, "mandate.json")

				child := startCrashChild(t, h, mp, pt.hook, "s1")
				if pt.hook == 0 {
					waitUntil(t, "the step to note its pid", func() bool { return exists(filepath.Join(marks, "pid")) })
					if pt.wrote {
						writeFile(t, marks, "go", "")
						waitUntil(t, "the step's write", func() bool { return exists(filepath.Join(marks, "wrote")) })
					}
					child.Kill(t)
				} else {
					child.Killed(t)
				}
				stepPid := 0
				if b, err := os.ReadFile(filepath.Join(marks, "pid")); err == nil {
					stepPid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				}
				if stepPid > 0 {
					// Should the fix fail, the step's process must not outlive the test.
					t.Cleanup(func() { syscall.Kill(-stepPid, syscall.SIGKILL) })
				}

				eng := openEngine(t, h)
				defer eng.Close()
				j := journalOf(t, eng)
				s := j.State().Mandate("m1").Step("s1")
				if pt.hook == steps.ChildStarted {
					if s.Status != events.StatusPending || s.Pid != 0 {
						t.Fatalf("killed before the start was recorded: %+v", s)
					}
				} else {
					if s.Status != events.StatusExecuting || s.Pid == 0 || s.PidStart == 0 || s.BootID == "" {
						t.Fatalf("step.executing does not name the process: %+v", s)
					}
					if stepPid != 0 && stepPid != s.Pid {
						t.Fatalf("recorded pid %d, the step ran as %d", s.Pid, stepPid)
					}
				}
				// Recovery never says safe_to_retry while the step's process
				// runs: poll until it no longer says in_flight.
				var plan *Plan
				waitUntil(t, "the step's process to end", func() bool {
					alive, _ := s.Process().Running()
					plan = Recover(j, PlanOptions{})
					ps := planStep(t, plan, "s1")
					// Alive before and after the plan: it ran throughout (it
					// may end in between, and the plan then rightly says so).
					if stillAlive, _ := s.Process().Running(); alive && stillAlive && ps.Verdict != InFlight {
						t.Fatalf("pid %d runs, but the plan says %+v", s.Pid, ps)
					}
					if ps.Verdict == InFlight && (ps.Pid != s.Pid || ps.Evidence.Pid != s.Pid || ps.Action != ActionNone) {
						t.Fatalf("in_flight line %+v", ps)
					}
					return ps.Verdict != InFlight
				})
				if _, err := Apply(ctx, j, plan, ApplyOptions{}); err != nil {
					t.Fatal(err)
				}
				// Run again, the step free to go through.
				writeFile(t, marks, "go", "")
				writeFile(t, marks, "go2", "")
				m, _ := steps.ParseMandate([]byte(spec))
				r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work})
				if err != nil {
					t.Fatal(err)
				}
				_, runErr := r.Run(ctx, m, []byte(spec))
				ps := planStep(t, plan, "s1")
				switch {
				case pt.wrote && !k.expect:
					// Something changed and nothing tells what: a human decides.
					if ps.Verdict != ManualReview || !errors.Is(runErr, steps.ErrNeedsReview) {
						t.Fatalf("verdict %+v, run %v; want manual_review and a refused run", ps, runErr)
					}
				case runErr != nil:
					t.Fatalf("run again (after %+v): %v", ps, runErr)
				}
				b, _ := os.ReadFile(filepath.Join(work, "out"))
				if string(b) != "w\n" {
					t.Fatalf("out = %q, want exactly one write (verdict was %s/%s)", b, ps.Verdict, ps.Evidence.Reason)
				}
				if n := countType(t, eng, events.TypeStepPlanned); n != 1 {
					t.Fatalf("%d plans", n)
				}
			})
		}
	}
}

// TestInFlightStepIsNeverRunAgain: a step whose recorded process still
// runs (here a live sleep standing for a killed runner's step) is not
// resumed by start-up recovery (wait_for_operator, step_in_flight), not
// reset by recover --apply, and not started again by a runner even after
// a reset by hand; once the process is gone, start-up recovery resumes it.
func TestInFlightStepIsNeverRunAgain(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	h := home.Home{Dir: t.TempDir()}
	spec := `{"id":"m1","steps":[{"id":"s1","argv":["sh","-c","echo w >> out"],"env":["PATH"],"world":["out"]}]}`
	writeFile(t, work, "mandate.json", spec)
	eng := openEngine(t, h)
	defer eng.Close()
	j := journalOf(t, eng)
	m, _ := steps.ParseMandate([]byte(spec))
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.PlanOf(m, []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(ctx, plan); err != nil {
		t.Fatal(err)
	}
	proc := exec.Command("sleep", "60")
	proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Process.Kill(); proc.Wait() })
	p, err := steps.ProcessOf(proc.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(ctx, &events.StepExecuting{MandateID: "m1", StepID: "s1", ObservedPreHash: plan.Steps[0].PreHash,
		Pid: p.Pid, PidStart: p.Start, BootID: p.BootID}); err != nil {
		t.Fatal(err)
	}

	// Start-up: the world still equals its pre state (safe_to_retry but
	// for the process): it waits.
	sp, res, err := Start(ctx, j, StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := planStep(t, sp, "s1")
	if pm := sp.Mandates[0]; pm.Resume != ResumeWait || pm.Reason != WhyInFlight || len(res.Mandates()) != 0 ||
		ps.Verdict != InFlight || ps.Evidence.Reason != ReasonProcessRunning || ps.Pid != p.Pid || ps.Action != ActionNone {
		t.Fatalf("start-up with the step in flight: %+v %+v", pm, ps)
	}
	if got := countType(t, eng, events.TypeStepReset); got != 0 {
		t.Fatal("start-up reset a step in flight")
	}
	// recover --apply: nothing for that step.
	rp := Recover(j, PlanOptions{})
	if n, err := Apply(ctx, j, rp, ApplyOptions{}); err != nil || n != 0 || len(rp.InFlight()) != 1 {
		t.Fatalf("apply with the step in flight: %d %v %+v", n, err, rp.Steps)
	}
	// A reset by hand, then a run: refused while the process runs.
	if err := j.Record(ctx, &events.StepReset{MandateID: "m1", StepID: "s1", Reason: "operator"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, m, []byte(spec)); !errors.Is(err, steps.ErrInFlight) {
		t.Fatalf("run beside a live process: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "out")); len(b) != 0 {
		t.Fatalf("out = %q", b)
	}
	// The process ends: the next start resumes the mandate, once.
	proc.Process.Kill()
	proc.Wait()
	if _, err := OnStart(ctx, j, StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "out")); string(b) != "w\n" || j.State().Mandate("m1").Status != steps.MandateCompleted {
		t.Fatalf("after the process ended: out %q, mandate %s", b, j.State().Mandate("m1").Status)
	}
}

package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/cmlab/cmlab/steps"
)

// The crash child: a re-exec of this test binary that runs a mandate and
// SIGKILLs itself at one crash point of one step (through the runner's
// Hook, a test seam; production code reads no environment for it).
const (
	envChild   = "CMLAB_RECOVERY_CRASH_CHILD"
	envHome    = "CMLAB_RECOVERY_CRASH_HOME"
	envMandate = "CMLAB_RECOVERY_CRASH_MANDATE"
	envPoint   = "CMLAB_RECOVERY_CRASH_POINT"
	envStep    = "CMLAB_RECOVERY_CRASH_STEP"
)

func TestCrashChild(t *testing.T) {
	crashchild.Role(t, envChild, "the runner crash tests")
	ctx := context.Background()
	eng, err := engine.Open(ctx, engine.Options{Home: home.Home{Dir: os.Getenv(envHome)}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	point, _ := strconv.Atoi(os.Getenv(envPoint))
	step := os.Getenv(envStep)
	spec, err := os.ReadFile(os.Getenv(envMandate))
	if err != nil {
		os.Exit(2)
	}
	m, err := steps.ParseMandate(spec)
	if err != nil {
		os.Exit(2)
	}
	j, err := steps.NewJournal(eng)
	if err != nil {
		os.Exit(2)
	}
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: filepath.Dir(os.Getenv(envMandate)), Hook: func(p steps.CrashPoint, s string) {
		if int(p) == point && s == step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}})
	if err != nil {
		os.Exit(2)
	}
	if _, err := r.Run(ctx, m, spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	eng.Close()
	os.Exit(0)
}

// runCrashChild runs the mandate in a child killed at point of step.
func runCrashChild(t *testing.T, h home.Home, mandatePath string, point steps.CrashPoint, step string) {
	t.Helper()
	startCrashChild(t, h, mandatePath, point, step).Killed(t)
}

// startCrashChild starts the runner child; it kills itself at point of
// step (0: never; the test kills it).
func startCrashChild(t *testing.T, h home.Home, mandatePath string, point steps.CrashPoint, step string) *crashchild.Child {
	t.Helper()
	return crashchild.Start(t, "TestCrashChild", envChild+"=1", envHome+"="+h.Dir, envMandate+"="+mandatePath,
		envPoint+"="+strconv.Itoa(int(point)), envStep+"="+step)
}

// threeStepMandate writes a mandate whose step i appends "sN\n" to outN.txt:
// running a step twice leaves a visibly different file.
func threeStepMandate(t *testing.T, dir, id string, expect bool) string {
	t.Helper()
	spec := `{"id":"` + id + `","name":"three files","steps":[`
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
	p := filepath.Join(dir, "mandate.json")
	writeFile(t, dir, "mandate.json", spec)
	return p
}

func writeFile(t *testing.T, dir, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func openEngine(t *testing.T, h home.Home) *engine.Engine {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// sideEffects returns the content of out1..3.txt ("" for missing).
func sideEffects(t *testing.T, dir string) [3]string {
	var out [3]string
	for i := range out {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out%d.txt", i+1)))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func planStep(t *testing.T, p *Plan, step string) PlanStep {
	t.Helper()
	for _, s := range p.Steps {
		if s.StepID == step {
			return s
		}
	}
	t.Fatalf("plan has no step %s: %+v", step, p.Steps)
	return PlanStep{}
}

func countType(t *testing.T, eng *engine.Engine, typ string) int {
	t.Helper()
	n := 0
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// crashedAfterExecuting runs the three-step mandate m1 (no expect_post) in
// a child killed right after s2's executing was recorded, and opens the
// crashed home (closed at the end of the test) with a State subscribed.
// crashed is the time of m1's last transition.
func crashedAfterExecuting(t *testing.T) (work string, eng *engine.Engine, pre *steps.State, crashed time.Time) {
	t.Helper()
	work = t.TempDir()
	h := home.Home{Dir: t.TempDir()}
	mp := threeStepMandate(t, work, "m1", false)
	runCrashChild(t, h, mp, steps.AfterExecuting, "s2")
	eng = openEngine(t, h)
	t.Cleanup(func() { eng.Close() })
	pre = steps.NewState()
	if err := eng.Subscribe(pre); err != nil {
		t.Fatal(err)
	}
	return work, eng, pre, time.UnixMilli(pre.Mandate("m1").LastTS)
}

// TestCrashMatrix kills the runner at each of the four points of the
// middle step of a three-step mandate, with and without expect_post, and
// checks the verdict, the evidence, the applied decision and the resumed
// mandate's side effects.
func TestCrashMatrix(t *testing.T) {
	all := [3]string{"s1\n", "s2\n", "s3\n"}
	tests := []struct {
		point    steps.CrashPoint
		expect   bool
		status   string
		verdict  string
		reason   string
		action   string
		final    [3]string // side effects after recover --apply + resume
		resumeOK bool
	}{
		{steps.BeforeExecuting, true, "pending", SafeToRetry, ReasonNeverReachedExecuting, ActionNone, all, true},
		{steps.BeforeExecuting, false, "pending", SafeToRetry, ReasonNeverReachedExecuting, ActionNone, all, true},
		{steps.AfterExecuting, true, "executing", SafeToRetry, ReasonCurrentPreMatches, ActionReset, all, true},
		{steps.AfterExecuting, false, "executing", SafeToRetry, ReasonCurrentPreMatches, ActionReset, all, true},
		{steps.AfterSideEffect, true, "executing", AlreadyDone, ReasonCurrentMatchesPost, ActionComplete, all, true},
		// Without expect_post the world tells only that something changed:
		// undecidable, so a human decides and step 3 never runs.
		{steps.AfterSideEffect, false, "executing", ManualReview, ReasonInterruptedDuringExecute, ActionNeedsReview, [3]string{"s1\n", "s2\n", ""}, false},
		{steps.AfterCompleted, true, "completed", AlreadyDone, ReasonWALRecordedCompletion, ActionNone, all, true},
		{steps.AfterCompleted, false, "completed", AlreadyDone, ReasonWALRecordedCompletion, ActionNone, all, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/expect_post=%v", tc.point, tc.expect), func(t *testing.T) {
			ctx := context.Background()
			work := t.TempDir()
			h := home.Home{Dir: t.TempDir()}
			mp := threeStepMandate(t, work, "m1", tc.expect)
			runCrashChild(t, h, mp, tc.point, "s2")

			eng := openEngine(t, h)
			defer eng.Close()
			j, err := steps.NewJournal(eng)
			if err != nil {
				t.Fatal(err)
			}
			plan := Recover(j, PlanOptions{})
			s1, s2, s3 := planStep(t, plan, "s1"), planStep(t, plan, "s2"), planStep(t, plan, "s3")
			if s1.Verdict != AlreadyDone || s1.Evidence.Reason != ReasonWALRecordedCompletion || s1.Action != ActionNone {
				t.Fatalf("s1 = %+v", s1)
			}
			if s2.Status != tc.status || s2.Verdict != tc.verdict || s2.Evidence.Reason != tc.reason || s2.Action != tc.action {
				t.Fatalf("s2 = %+v\nwant status %s verdict %s reason %s action %s", s2, tc.status, tc.verdict, tc.reason, tc.action)
			}
			if s3.Verdict != SafeToRetry || s3.Evidence.Reason != ReasonNeverReachedExecuting || s3.Action != ActionNone {
				t.Fatalf("s3 = %+v", s3)
			}
			if got := plan.NeedsReview(); got != (tc.verdict == ManualReview) {
				t.Fatalf("NeedsReview = %v", got)
			}
			// recover --apply.
			n, err := Apply(ctx, j, plan, ApplyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantN := 0
			if tc.action != ActionNone {
				wantN = 2 // the decision + recovery.applied
			}
			if n != wantN {
				t.Fatalf("Apply appended %d events, want %d", n, wantN)
			}
			// A second recover --apply appends nothing.
			last := eng.Log().LastSeq()
			again := Recover(j, PlanOptions{})
			if n, err := Apply(ctx, j, again, ApplyOptions{}); err != nil || n != 0 || eng.Log().LastSeq() != last {
				t.Fatalf("second apply: %d events, %v", n, err)
			}
			// Resume the mandate.
			spec, _ := os.ReadFile(mp)
			m, _ := steps.ParseMandate(spec)
			r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(ctx, m, spec)
			if tc.resumeOK && err != nil {
				t.Fatalf("resume: %v", err)
			}
			if !tc.resumeOK && !errors.Is(err, steps.ErrNeedsReview) {
				t.Fatalf("resume: %v, want ErrNeedsReview", err)
			}
			if res.Planned {
				t.Fatal("resume re-planned the mandate")
			}
			if got := sideEffects(t, work); got != tc.final {
				t.Fatalf("side effects %q, want %q", got, tc.final)
			}
			st := j.State().Mandate("m1")
			if tc.resumeOK {
				if st.Status != steps.MandateCompleted {
					t.Fatalf("mandate %s", st.Status)
				}
				// s1 completed before the crash: its result comes from the log.
				if !res.Steps[0].FromLog || res.Steps[0].ResultHash != st.Step("s1").ResultHash || res.Steps[0].ResultHash == "" {
					t.Fatalf("s1 result %+v", res.Steps[0])
				}
				if tc.action == ActionComplete && !st.Step("s2").Recovered {
					t.Fatal("s2 not marked recovered")
				}
			} else if st.Status != steps.MandatePaused || st.Step("s2").Status != events.StatusNeedsReview {
				t.Fatalf("mandate %s, s2 %s", st.Status, st.Step("s2").Status)
			}
			if got := countType(t, eng, events.TypeStepPlanned); got != 1 {
				t.Fatalf("%d plans", got)
			}
		})
	}
}

// TestRunNeverRerunsCompleted: a finished mandate run again runs nothing
// and reports every result from the log.
func TestRunNeverRerunsCompleted(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	h := home.Home{Dir: t.TempDir()}
	mp := threeStepMandate(t, work, "m1", true)
	eng := openEngine(t, h)
	defer eng.Close()
	j, err := steps.NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := os.ReadFile(mp)
	m, _ := steps.ParseMandate(spec)
	r, _ := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work})
	first, err := r.Run(ctx, m, spec)
	if err != nil {
		t.Fatal(err)
	}
	last := eng.Log().LastSeq()
	second, err := r.Run(ctx, m, spec)
	if err != nil {
		t.Fatal(err)
	}
	if eng.Log().LastSeq() != last {
		t.Fatal("second run appended")
	}
	for i := range second.Steps {
		if !second.Steps[i].FromLog || second.Steps[i].ResultHash != first.Steps[i].ResultHash ||
			second.Steps[i].OutputDigest != first.Steps[i].OutputDigest || *second.Steps[i].ExitCode != 0 {
			t.Fatalf("step %d: first %+v second %+v", i, first.Steps[i], second.Steps[i])
		}
	}
	if got := sideEffects(t, work); got != [3]string{"s1\n", "s2\n", "s3\n"} {
		t.Fatalf("side effects %q", got)
	}
	// A changed file under the same id is refused.
	m.Steps[1].Argv = []string{"true"}
	if _, err := r.Run(ctx, m, nil); !errors.Is(err, steps.ErrPlanMismatch) {
		t.Fatalf("changed mandate: %v", err)
	}
}

// TestAutoResume: a mandate killed before its side effect is finished by
// the next daemon start within the lookback window and left alone outside.
func TestAutoResume(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  time.Duration
		resume bool
		why    string
	}{
		{"within window", 90 * time.Minute, true, WhyWithinLookback},
		{"outside window", 2*time.Hour + time.Minute, false, WhyOutsideLookback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			work, eng, pre, crashed := crashedAfterExecuting(t)
			now := func() time.Time { return crashed.Add(tc.after) }
			plan, err := OnStart(ctx, journalOf(t, eng), StartOptions{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if pm := plan.Mandates[0]; pm.Resume != map[bool]string{true: ResumeAuto, false: ResumeWait}[tc.resume] || pm.Reason != tc.why || pm.ResumeError != "" {
				t.Fatalf("mandate decision %+v", pm)
			}
			st := pre.Mandate("m1")
			if tc.resume {
				if st.Status != steps.MandateCompleted || sideEffects(t, work) != [3]string{"s1\n", "s2\n", "s3\n"} {
					t.Fatalf("not resumed: %s %q", st.Status, sideEffects(t, work))
				}
				if st.Step("s2").IdemKey != steps.IdemKey("m1", "s2", st.Step("s2").ParamsHash) {
					t.Fatal("resumed step changed its idem_key")
				}
			} else {
				if st.Step("s2").Status != events.StatusExecuting || sideEffects(t, work) != [3]string{"s1\n", "", ""} {
					t.Fatalf("touched outside the window: %s %q", st.Step("s2").Status, sideEffects(t, work))
				}
			}
			// The decision is logged once; the next start adds nothing new
			// for a mandate that still waits.
			last := eng.Log().LastSeq()
			if _, err := OnStart(ctx, journalOf(t, eng), StartOptions{Now: now}); err != nil {
				t.Fatal(err)
			}
			if eng.Log().LastSeq() != last {
				t.Fatalf("second start appended %d events", eng.Log().LastSeq()-last)
			}
			if got := countType(t, eng, events.TypeRecoveryApplied); got != 1 {
				t.Fatalf("%d recovery.applied events", got)
			}
		})
	}
}

// TestOnStartClosesOpenBlock: a terminal block open at crash time gets
// exactly one END with reason daemon_crashed, however often the daemon
// starts.
func TestOnStartClosesOpenBlock(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: t.TempDir()}
	eng := openEngine(t, h)
	begin := events.MustNew("conv1", &events.PtyBlockBegin{Block: events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "sleep 100", Cwd: "/", Status: "running", OutputPath: "pty/conv1/blocks/blk_1.out"}})
	if _, err := eng.Append(ctx, begin); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	for range 2 {
		eng = openEngine(t, h)
		if _, err := OnStart(ctx, journalOf(t, eng), StartOptions{}); err != nil {
			t.Fatal(err)
		}
		eng.Close()
	}
	eng = openEngine(t, h)
	defer eng.Close()
	ends := 0
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != events.TypePtyBlockEnd {
			continue
		}
		e, err := events.DecodeAs[*events.PtyBlockEnd](ev)
		if err != nil {
			t.Fatal(err)
		}
		if e.Block.BlockID != "blk_1" || e.Block.Status != "failed" || e.Block.Reason != "daemon_crashed" {
			t.Fatalf("END %+v", e.Block)
		}
		ends++
	}
	if ends != 1 {
		t.Fatalf("%d ENDs, want exactly 1", ends)
	}
}

// TestOnStartDecisions: of three open mandates only the one whose steps are
// all decidable and which has a recorded spec is resumed; the others wait
// with their reason, logged once.
func TestOnStartDecisions(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	h := home.Home{Dir: t.TempDir()}
	eng := openEngine(t, h)
	defer eng.Close()
	j, err := steps.NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work})
	record := func(p events.Payload) {
		t.Helper()
		if err := j.Record(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// a: planned by a runner that died before its first step.
	specA := []byte(`{"id":"a","steps":[{"id":"s","argv":["sh","-c","printf a >> a.txt"],"env":["PATH"],"world":["a.txt"]}]}`)
	ma, _ := steps.ParseMandate(specA)
	pa, err := r.PlanOf(ma, specA)
	if err != nil {
		t.Fatal(err)
	}
	record(pa)
	// b: interrupted mid-step, world changed, no expected post.
	specB := []byte(`{"id":"b","steps":[{"id":"s","argv":["sh","-c","printf b >> b.txt"],"env":["PATH"],"world":["b.txt"]}]}`)
	mb, _ := steps.ParseMandate(specB)
	pb, _ := r.PlanOf(mb, specB)
	record(pb)
	record(&events.StepExecuting{MandateID: "b", StepID: "s", ObservedPreHash: pb.Steps[0].PreHash})
	writeFile(t, work, "b.txt", "partial")
	// c: a journal client's mandate (no spec), interrupted with its world as planned.
	record(&events.StepPlanned{MandateID: "c", Steps: []events.PlannedStep{{StepID: "s", Tool: "deploy", ParamsHash: h256("c"), PreHash: pa.Steps[0].PreHash, World: []string{"c.txt"}, Dir: work}}})
	record(&events.StepExecuting{MandateID: "c", StepID: "s", ObservedPreHash: h256("x")})

	plan, err := OnStart(ctx, journalOf(t, eng), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"a": {ResumeAuto, WhyWithinLookback}, "b": {ResumeWait, WhyManualReview}, "c": {ResumeWait, WhyNotResumable}}
	for _, pm := range plan.Mandates {
		if w := want[pm.MandateID]; pm.Resume != w[0] || pm.Reason != w[1] || pm.ResumeError != "" {
			t.Fatalf("%s: %+v, want %v", pm.MandateID, pm, w)
		}
	}
	st := j.State()
	if st.Mandate("a").Status != steps.MandateCompleted || st.Mandate("b").Step("s").Status != events.StatusExecuting || st.Mandate("c").Step("s").Status != events.StatusExecuting {
		t.Fatalf("a %s, b %s, c %s", st.Mandate("a").Status, st.Mandate("b").Step("s").Status, st.Mandate("c").Step("s").Status)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "a.txt")); string(b) != "a" {
		t.Fatalf("a.txt = %q", b)
	}
	last := eng.Log().LastSeq()
	plan, err = OnStart(ctx, journalOf(t, eng), StartOptions{})
	if err != nil || eng.Log().LastSeq() != last {
		t.Fatalf("second start appended %d events (%v)", eng.Log().LastSeq()-last, err)
	}
	// The waiting decisions stay visible in the plan.
	for _, pm := range plan.Mandates {
		if pm.MandateID == "b" && (pm.Resume != ResumeWait || pm.Reason != WhyManualReview) {
			t.Fatalf("b after restart: %+v", pm)
		}
	}
	fresh := Recover(j, PlanOptions{})
	for _, pm := range fresh.Mandates {
		if pm.MandateID == "c" && (pm.Resume != ResumeWait || pm.Reason != WhyNotResumable) {
			t.Fatalf("c in recover's plan: %+v", pm)
		}
	}
}

func h256(s string) string { return steps.HashBytes([]byte(s)) }

// journalOf is a step journal over eng, as a daemon builds one.
func journalOf(t *testing.T, eng *engine.Engine) *steps.Journal {
	t.Helper()
	j, err := steps.NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

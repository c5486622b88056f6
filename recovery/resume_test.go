package recovery

import (
	"context"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/steps"
)

// TestStartDefersTheRun: Start decides and records the resume but runs
// nothing; the Resumer runs the mandate in the background, Wait reports
// its end, and Stop after the end is a no-op.
func TestStartDefersTheRun(t *testing.T) {
	ctx := context.Background()
	work, eng, pre, crashed := crashedAfterExecuting(t)
	now := func() time.Time { return crashed.Add(time.Minute) }
	plan, res, err := Start(ctx, journalOf(t, eng), StartOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if pm := plan.Mandates[0]; pm.Resume != ResumeAuto || pm.Reason != WhyWithinLookback {
		t.Fatalf("decision %+v", pm)
	}
	if got := res.Mandates(); len(got) != 1 || got[0] != "m1" {
		t.Fatalf("resumer mandates %q", got)
	}
	// Decided and recorded (s2 reset to pending), not run.
	if got := countType(t, eng, events.TypeRecoveryApplied); got != 1 {
		t.Fatalf("%d recovery.applied events", got)
	}
	if sideEffects(t, work) != [3]string{"s1\n", "", ""} || pre.Mandate("m1").Step("s2").Status != events.StatusPending {
		t.Fatalf("Start ran the mandate: %q %s", sideEffects(t, work), pre.Mandate("m1").Step("s2").Status)
	}
	if errs, err := (&Resumer{}).Wait(ctx); errs != nil || err != nil {
		t.Fatalf("Wait before Start: %v %v", errs, err)
	}
	res.Start(ctx)
	res.Start(ctx) // second call: no-op
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	errs, err := res.Wait(wctx)
	if err != nil || errs != nil {
		t.Fatalf("resume: %v %v", err, errs)
	}
	res.Stop()
	if st := pre.Mandate("m1"); st.Status != steps.MandateCompleted || sideEffects(t, work) != [3]string{"s1\n", "s2\n", "s3\n"} {
		t.Fatalf("after resume: %s %q", st.Status, sideEffects(t, work))
	}
}

package daemon

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
)

// blockingMandate records the plan of a one-step mandate whose command
// starts a long child (its pid in bg.pid), writes started.txt, waits until
// release exists, then kills the child and appends "done" to out.txt; it
// returns the last transition's time.
func blockingMandate(t *testing.T, h home.Home, work string) time.Time {
	t.Helper()
	ctx := context.Background()
	spec := []byte(`{"id":"m1","name":"blocks","steps":[{"id":"s1","argv":["sh","-c","sleep 300 & echo $! > bg.pid; echo started > started.txt; while [ ! -e release ]; do sleep 0.02; done; kill $!; echo done >> out.txt"],"env":["PATH"],"world":["out.txt"]}]}`)
	m, err := steps.ParseMandate(spec)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	j, err := steps.NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.PlanOf(m, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(ctx, p); err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(j.State().Mandate("m1").LastTS)
}

// mandateState reads m1's recorded state from a closed home.
func mandateState(t *testing.T, h home.Home) *steps.MandateState {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	st := steps.NewState()
	if err := eng.Subscribe(st); err != nil {
		t.Fatal(err)
	}
	return st.Mandate("m1")
}

func awaitFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", filepath.Base(p))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDaemonResumesInBackground: a mandate interrupted within the lookback
// window is resumed at daemon start without delaying it: the daemon answers
// /api/health while the resumed step still runs; releasing the step
// completes the mandate (side effect once, idem_key kept, output kept under
// the home, 0600); shutting down while the step runs cancels it and waits,
// leaving the step executing for the next start to classify.
func TestDaemonResumesInBackground(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool
	}{{"release completes", true}, {"shutdown cancels and waits", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			work := t.TempDir()
			h := home.Home{Dir: privateTempDir(t)}
			last := blockingMandate(t, h, work)
			now := func() time.Time { return last.Add(90 * time.Minute) }

			dctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ready := make(chan labapi.DaemonInfo, 1)
			resumers := make(chan *recovery.Resumer, 1)
			done := make(chan error, 1)
			go func() {
				done <- Run(dctx, Options{Home: h, Listen: "127.0.0.1:0", now: now,
					Ready: func(i labapi.DaemonInfo) { ready <- i }, onResumer: func(r *recovery.Resumer) { resumers <- r }})
			}()
			var res *recovery.Resumer
			select {
			case res = <-resumers:
			case err := <-done:
				t.Fatalf("daemon: %v", err)
			case <-time.After(60 * time.Second):
				t.Fatal("no resumer")
			}
			if got := res.Mandates(); len(got) != 1 || got[0] != "m1" {
				t.Fatalf("resumed %q, want [m1]", got)
			}
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("daemon: %v", err)
			case <-time.After(60 * time.Second):
				t.Fatal("daemon not ready while the resumed step runs")
			}
			awaitFile(t, filepath.Join(work, "started.txt"))
			c, closeFn, err := Dial(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			var health map[string]any
			if err := c.Do(ctx, http.MethodGet, "/api/health", "", nil, &health); err != nil || !c.Remote {
				t.Fatalf("health while the step runs: %v remote=%v", err, c.Remote)
			}
			if _, err := os.Stat(filepath.Join(work, "out.txt")); !os.IsNotExist(err) {
				t.Fatalf("step finished before release: %v", err)
			}

			if tc.release {
				// `cmlab recover --apply` through the daemon leaves the
				// running step alone (it is this daemon's runner's).
				var applied recovery.Plan
				if err := c.Do(ctx, http.MethodPost, "/api/recovery/apply", "", nil, &applied); err != nil {
					t.Fatalf("recovery apply: %v", err)
				}
				if n := applied.Pending(); n != 0 {
					t.Fatalf("recovery apply acted on %d steps while the resumed step runs: %+v", n, applied.Steps)
				}
				if err := os.WriteFile(filepath.Join(work, "release"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
				errs, err := res.Wait(wctx)
				wcancel()
				if err != nil || errs != nil {
					t.Fatalf("resume: %v %v", err, errs)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("daemon: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("daemon did not stop")
			}
			// Stop waited: nothing of the step runs after Run returned.
			if _, err := res.Wait(ctx); err != nil {
				t.Fatal(err)
			}

			st := mandateState(t, h)
			s := st.Step("s1")
			if s.IdemKey != steps.IdemKey("m1", "s1", s.ParamsHash) {
				t.Fatalf("idem_key %q changed", s.IdemKey)
			}
			out, _ := os.ReadFile(filepath.Join(work, "out.txt"))
			logPath, err := recovery.ResumeLogPath(h, "m1")
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(logPath)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("resume output file: %v %v", err, fi)
			}
			logged, _ := os.ReadFile(logPath)
			if !bytes.Contains(logged, []byte("m1/s1: running")) {
				t.Fatalf("resume output %q lacks the step line", logged)
			}
			if tc.release {
				if st.Status != steps.MandateCompleted || s.Status != events.StatusCompleted || string(out) != "done\n" {
					t.Fatalf("mandate %s, step %s, out %q", st.Status, s.Status, out)
				}
				if s.OutputDigest != steps.HashBytes(nil) {
					// The command prints nothing; its digest is that of no output.
					t.Fatalf("output digest %s", s.OutputDigest)
				}
				return
			}
			if s.Status != events.StatusExecuting || len(out) != 0 || !strings.Contains(string(logged), "left executing") {
				t.Fatalf("after shutdown: step %s, out %q, log %q", s.Status, out, logged)
			}
			// The whole process group was killed: the step's child too.
			pidb, err := os.ReadFile(filepath.Join(work, "bg.pid"))
			if err != nil {
				t.Fatal(err)
			}
			pid := strings.TrimSpace(string(pidb))
			deadline := time.Now().Add(60 * time.Second)
			for {
				stat, err := os.ReadFile("/proc/" + pid + "/stat")
				if err != nil {
					break // gone
				}
				if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
					break // killed, not yet reaped
				}
				if time.Now().After(deadline) {
					t.Fatalf("the step's child %s survived the shutdown: %s", pid, stat)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The next start classifies the step left executing.
			eng, err := engine.Open(ctx, engine.Options{Home: h})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			plan, res2, err := recovery.Start(ctx, newJournal(t, eng), recovery.StartOptions{Now: now, NoResume: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res2.Mandates()) != 0 || len(plan.Steps) != 1 || plan.Steps[0].Status != events.StatusExecuting ||
				plan.Steps[0].Verdict != recovery.SafeToRetry || plan.Steps[0].Evidence.Reason != "current_pre_matches_expected" {
				t.Fatalf("next start: %+v", plan.Steps)
			}
		})
	}
}

// newJournal is a step journal over eng, as a daemon builds one.
func newJournal(t *testing.T, eng *engine.Engine) *steps.Journal {
	t.Helper()
	j, err := steps.NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

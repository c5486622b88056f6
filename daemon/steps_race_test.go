package daemon

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/steps"
)

// TestOneJournalPerDaemon: while the daemon's start-up auto-resume is
// about to record a step executing, 16 clients post transitions of that
// same step through the API (12 executing, 4 reset), all let go at once,
// for three daemon starts. With one step journal per daemon (the steps
// routes and auto-resume share its lock) every transition in the log is
// valid from the state just before it — none was accepted from a stale
// state — so each attempt has exactly one step.executing, and what was
// acknowledged is exactly what the log holds.
func TestOneJournalPerDaemon(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	h := home.Home{Dir: privateTempDir(t)}
	last := blockingMandate(t, h, work)
	now := func() time.Time { return last.Add(time.Minute) }
	const rounds, clients = 3, 16
	for round := range rounds {
		before := lastSeqOf(t, h)
		atGate := make(chan struct{}, 1)
		release := make(chan struct{})
		dctx, cancel := context.WithCancel(ctx)
		ready := make(chan labapi.DaemonInfo, 1)
		done := make(chan error, 1)
		go func() {
			done <- Run(dctx, Options{Home: h, Listen: "127.0.0.1:0", now: func() time.Time { return now().Add(time.Duration(round) * time.Second) },
				Ready: func(i labapi.DaemonInfo) { ready <- i },
				resumeHook: func(p steps.CrashPoint, step string) {
					if p == steps.ChildStarted {
						atGate <- struct{}{}
						<-release
					}
				}})
		}()
		for _, ch := range []chan struct{}{atGate} {
			select {
			case <-ch:
			case err := <-done:
				t.Fatalf("round %d: daemon: %v", round, err)
			case <-time.After(60 * time.Second):
				t.Fatalf("round %d: auto-resume never reached the step", round)
			}
		}
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("round %d: daemon: %v", round, err)
		}
		c, closeFn, err := Dial(ctx, h)
		if err != nil || !c.Remote {
			t.Fatalf("dial: %v", err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		accepted := map[string]int{}
		pre, _ := steps.WorldHash(work, []string{"out.txt"})
		for i := range clients {
			tr, body := "executing", any(map[string]string{"step_id": "s1", "observed_pre_hash": pre})
			if i%4 == 3 {
				tr, body = "reset", map[string]string{"step_id": "s1", "reason": "client"}
			}
			wg.Go(func() {
				<-release
				err := c.Do(ctx, http.MethodPost, "/api/steps/m1/"+tr, "r"+strconv.Itoa(round)+"-"+strconv.Itoa(i), body, nil)
				var ae *labapi.APIError
				switch {
				case err == nil:
					mu.Lock()
					accepted[tr]++
					mu.Unlock()
				case errors.As(err, &ae) && ae.Code == labapi.CodeInvalidArgument:
				default:
					t.Errorf("POST %s: %v", tr, err)
				}
			})
		}
		close(release) // the clients and the resumer go at once
		wg.Wait()
		closeFn()
		cancel() // stops the resumer (its step killed, left executing)
		if err := <-done; err != nil {
			t.Fatalf("round %d: daemon: %v", round, err)
		}

		// The log, checked transition by transition.
		eng, err := engine.Open(ctx, engine.Options{Home: h})
		if err != nil {
			t.Fatal(err)
		}
		st := steps.NewState()
		executing, byResumer := 0, 0
		for ev, err := range eng.Log().Events(1) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Seq > before && ev.Stream == "m1" {
				p, err := ev.Decode()
				if err != nil {
					t.Fatal(err)
				}
				if _, planned := p.(*events.StepPlanned); !planned {
					if err := steps.CheckTransition(st.Mandate("m1"), p); err != nil {
						t.Fatalf("round %d: seq %d %s was accepted from a stale state: %v", round, ev.Seq, ev.Type, err)
					}
				}
				if x, ok := p.(*events.StepExecuting); ok {
					executing++
					if x.Pid > 0 {
						byResumer++
					}
				}
			}
			st.Observe(ev)
		}
		eng.Close()
		if executing != accepted["executing"]+byResumer || byResumer > 1 || executing == 0 {
			t.Fatalf("round %d: %d step.executing in the log, %d acknowledged to clients, %d by the resumer", round, executing, accepted["executing"], byResumer)
		}
		t.Logf("round %d: executing %d (resumer %d), resets acknowledged %d", round, executing, byResumer, accepted["reset"])
	}
}

// lastSeqOf is the last seq of h's log.
func lastSeqOf(t *testing.T, h home.Home) uint64 {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	return eng.Log().LastSeq()
}

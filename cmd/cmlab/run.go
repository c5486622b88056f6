package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"text/tabwriter"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/steps"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// newRunCmd builds 'cmlab run MANDATE.json'.
func newRunCmd(g *globalOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   "run MANDATE.json",
		Short: "Run a mandate's commands as durable steps (resumable after a crash)",
		Long: `Run the steps of a mandate file through the durable step journal: the plan
is recorded once, then each step is recorded as executing (with the world
hash of its paths), run, and recorded as completed (world hash after, result
hash over exit code and output digest) or failed.

Running the same mandate again resumes it: completed steps are never run
again (their recorded result is read from the log), pending and failed
steps run. A step left executing by a crash needs 'cmlab recover --apply'
first; a step in review needs a human ('cmlab step complete|fail|reset').

The mandate file:
  {"id": "m1", "name": "build", "steps": [
    {"id": "fetch", "argv": ["sh", "-c", "curl -o a.txt …"], "cwd": "work",
     "env": ["PATH", "HOME"], "world": ["a.txt"],
     "expect_post": {"a.txt": "expected content\n"}}]}

cwd is relative to the mandate file's directory; world paths to the step's
cwd; env lists the variable names passed through (plus CMLAB_MANDATE_ID,
CMLAB_STEP_ID and CMLAB_IDEM_KEY, which stays the same when a step is
retried). expect_post (a world hash or path → content, null for missing)
lets recovery tell a finished step from an interrupted one.

Each step's process is started held at a gate; its pid and start time are
recorded with step.executing before the gate opens, it leads its own
process group and it dies with this process (Linux Pdeathsig). So a killed
'cmlab run' never leaves a step acting unrecorded, and 'cmlab recover' says
in_flight (never safe_to_retry) while anything of the step still runs.

Ctrl+C (SIGINT) or SIGTERM stops the running step (its process group is
killed), records it failed with error_class "cancelled" and exits 1.
'cmlab run cancel MANDATE_ID' cancels a mandate: no step of it starts
again and the daemon's start-up auto-resume skips it.

Transitions go through the running daemon when there is one (it is the
single writer); the commands run in this process. Exit codes: 0 done,
1 error, failed or cancelled step, 4 a step awaits review or still runs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMandate(cmd.Context(), g, args[0])
		},
	}
	c.AddCommand(newRunCancelCmd(g))
	return c
}

// newRunCancelCmd builds 'cmlab run cancel MANDATE_ID'.
func newRunCancelCmd(g *globalOpts) *cobra.Command {
	var reason, reqID string
	c := &cobra.Command{
		Use:   "cancel MANDATE_ID",
		Short: "Cancel a mandate: none of its steps starts again, auto-resume skips it",
		Long: `Record mandate.cancelled: no step of the mandate starts executing again
(through 'cmlab run', the steps API or the daemon's start-up auto-resume).
A step running now is not stopped by this (Ctrl+C on its 'cmlab run' does
that); it may still complete or fail. Run the work again under a new
mandate id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return stepPost(cmd, g, args[0], "cancel", reqID, map[string]string{"reason": reason})
		},
	}
	c.Flags().StringVar(&reason, "reason", "cancelled by the operator", "why (recorded with the event)")
	stepRequestIDFlag(c, &reqID)
	return c
}

// cancelOnSignal cancels ctx with steps.ErrCancelled on the first SIGINT
// or SIGTERM; the returned func stops listening and waits for its
// goroutine.
func cancelOnSignal(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-sigs:
			name := "SIGTERM"
			if s == syscall.SIGINT {
				name = "SIGINT"
			}
			cancel(fmt.Errorf("%w by %s", steps.ErrCancelled, name))
		case <-done:
		case <-ctx.Done():
		}
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}

func runMandate(ctx context.Context, g *globalOpts, path string) error {
	// A regular file, bounded: the zero device or a FIFO must not hang or
	// grow this process (one byte past the limit lets ParseMandate say so).
	spec, err := confine.ReadRegular(path, steps.MaxMandateBytes+1)
	if err != nil && !errors.Is(err, confine.ErrTooLarge) {
		return err
	}
	if errors.Is(err, confine.ErrTooLarge) {
		return fmt.Errorf("%s: over %d bytes, the most a mandate may have", path, steps.MaxMandateBytes)
	}
	m, err := steps.ParseMandate(spec)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	c, closeFn, err := dialLab(ctx, g)
	if err != nil {
		return err
	}
	defer closeFn()
	var out io.Writer = g.stdout
	if g.json {
		out = g.stderr
	}
	h, err := g.Home()
	if err != nil {
		return err
	}
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: &clientRecorder{c: c}, Base: filepath.Dir(abs), Output: out,
		StepOutput: steps.CaptureOutput(h)})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopSignals := cancelOnSignal(ctx, cancel)
	res, runErr := r.Run(ctx, m, spec)
	stopSignals()
	if res != nil {
		if g.json {
			if err := labPrintJSON(g, res); err != nil {
				return err
			}
		} else {
			writeRunTable(g.stdout, res)
		}
	}
	switch {
	case runErr == nil:
		return nil
	case errors.Is(runErr, steps.ErrNeedsReview), errors.Is(runErr, steps.ErrInFlight):
		return withCode(exitNeedReview, runErr)
	}
	return labErr(runErr)
}

func writeRunTable(w io.Writer, res *steps.RunResult) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tSTATUS\tEXIT\tRESULT\tSOURCE")
	for _, s := range res.Steps {
		exit := "-"
		if s.ExitCode != nil {
			exit = fmt.Sprint(*s.ExitCode)
		}
		src := "ran"
		if s.FromLog {
			src = "log (not run again)"
		}
		rh := s.ResultHash
		if rh == "" {
			rh = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.StepID, s.Status, exit, rh, src)
	}
	tw.Flush()
}

// clientRecorder records step transitions through the steps API (the
// daemon's, or an in-process server's when no daemon runs).
type clientRecorder struct{ c *labapi.Client }

// transitionRoutes name the route of the steps API (POST
// /api/steps/{mandate}/{route}) of each step transition's event type.
var transitionRoutes = map[string]string{
	events.TypeStepPlanned:      "plan",
	events.TypeStepExecuting:    "executing",
	events.TypeStepCompleted:    "completed",
	events.TypeStepFailed:       "failed",
	events.TypeStepNeedsReview:  "review",
	events.TypeStepReset:        "reset",
	events.TypeMandateCancelled: "cancel",
}

// Record implements recovery.Recorder: one POST with a fresh request id.
func (r *clientRecorder) Record(ctx context.Context, p events.Payload) error {
	mid, _ := steps.StepTarget(p)
	tr := transitionRoutes[p.EventType()]
	if tr == "" {
		return fmt.Errorf("%T is not a step transition", p)
	}
	return r.c.Do(ctx, http.MethodPost, "/api/steps/"+url.PathEscape(mid)+"/"+tr, uuid.NewString(), p, nil)
}

// Mandate implements recovery.Recorder.
func (r *clientRecorder) Mandate(ctx context.Context, id string) (*steps.MandateState, error) {
	var out struct {
		Mandate *steps.MandateState `json:"mandate"`
	}
	err := r.c.Do(ctx, http.MethodGet, "/api/steps?mandateId="+url.QueryEscape(id), "", nil, &out)
	var ae *labapi.APIError
	if errors.As(err, &ae) && ae.Code == labapi.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return out.Mandate, nil
}

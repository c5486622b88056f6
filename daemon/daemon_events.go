package daemon

import (
	"log/slog"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/recovery"
)

// The daemon's state changes that an operator reads in its log, beside
// the lifecycle lines of RunDaemon and serve: start-up decisions and the
// log's degraded mode.

// logStartupDecisions logs start-up recovery's decisions that did
// something or need someone: a mandate resumed (INFO), one left for the
// operator (WARN, naming the fix). A finished mandate took no decision
// and is not logged.
func logStartupDecisions(l *slog.Logger, plan *recovery.Plan) {
	for _, m := range plan.Mandates {
		switch {
		case m.ResumeError != "":
			l.Warn("start-up recovery could not resume a mandate; fix: cmlab recover", "mandate", m.MandateID, "reason", m.Reason, "err", m.ResumeError)
		case m.Resume == recovery.ResumeAuto:
			l.Info("start-up recovery: resuming mandate", "mandate", m.MandateID, "reason", m.Reason)
		case m.Resume != "":
			l.Warn("start-up recovery: mandate waits for the operator; fix: cmlab recover", "mandate", m.MandateID, "decision", m.Resume, "reason", m.Reason)
		}
	}
}

// degradedPoll is how often logDegraded looks at the log's state.
const degradedPoll = 500 * time.Millisecond

// logDegraded logs when the log enters the degraded mode (writes refused:
// an fsync failed) and when it leaves it; the returned function stops
// watching.
func logDegraded(eng *engine.Engine, l *slog.Logger) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(degradedPoll)
		defer t.Stop()
		var was error
		for {
			if err := eng.Err(); (err == nil) != (was == nil) {
				if err != nil {
					l.Error("degraded: the log cannot make writes durable; writes are refused, reads go on; fix: cmlab stop, free the disk or fix its error, cmlab serve", "err", err)
				} else {
					l.Info("recovered: the log accepts writes again")
				}
				was = err
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(quit); <-done }
}

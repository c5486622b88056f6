package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/labui"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
	"github.com/google/uuid"
)

// feedbackSweep is how often the daemon ingests complete lines other
// programs appended to feedback.jsonl when no feedback is posted.
const feedbackSweep = time.Second

// Home is a home opened by this process: the engine and everything built
// over it, in the order Open built them. Close takes them down in the
// reverse order.
type Home struct {
	// Dir is the home asked for; Served the one opened: a private copy
	// when a read-only home sits on a read-only filesystem (OnROFS).
	Dir    home.Home
	Served home.Home
	OnROFS bool

	Engine    *engine.Engine
	Journal   *steps.Journal                // the one step journal of this process
	Retention *retention.Model              // the retention/status read model
	Terminals *pty.Manager                  // nil when read-only or one-shot
	Server    *labapi.Server                // the HTTP face over all of the above
	labServer atomic.Pointer[labapi.Server] // Server, for the compaction's goroutine
	// OperatorToken is the token the server accepts for every route
	// (state/token, or one drawn for a one-shot home).
	OperatorToken string

	opts    Options
	resumer *recovery.Resumer // start-up auto-resume; nil when read-only or one-shot

	closeOnce sync.Once
	closeErr  error
	closers   []closer // run last first by Close
}

type closer struct {
	step string
	fn   func() error
}

// trace records a step of the start or stop sequence (Options.Trace).
func (o *Options) trace(step string) {
	if o.Trace != nil {
		o.Trace(step)
	}
}

// onClose pushes a step for Close to undo (last pushed, first run).
func (h *Home) onClose(step string, fn func() error) {
	h.closers = append(h.closers, closer{step, fn})
}

// Open opens home o.Home for this process and builds, in this order: the
// engine (tail repair, views brought up to the log; verification of what
// it trusted runs later, see Serving), the one step journal, start-up
// recovery (decisions taken and recorded before anything is served), the
// retention model and the compaction policy, the terminal manager, and
// the HTTP server over them. Nothing is listened on: Run adds the
// listener, state/daemon.json and the shutdown order; `cmlab mcp` serves
// the handler on stdio; a one-shot CLI command (Options.OneShot, Dial)
// calls it in-process.
//
// On error, what was built is closed again.
func Open(ctx context.Context, o Options) (_ *Home, err error) {
	o.defaults()
	h := &Home{Dir: o.Home, Served: o.Home, opts: o}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	if o.OneShot || !o.listens {
		// Reached by no socket: Listen only names the Host the in-process
		// handler accepts.
		o.Listen = "127.0.0.1:0"
		h.opts.Listen = o.Listen
	}
	if o.listens && o.ReadOnly && o.Home.OnReadOnlyFS() {
		// The log cannot be opened on a read-only filesystem (its lock
		// file, its last segment): serve a private copy instead, which
		// nothing can make differ from the home while it stays read-only.
		// The operator token opens a shell as this user: refuse to serve
		// a home someone else could read it from before anything runs.
		if err := o.Home.CheckPrivate(); err != nil {
			return nil, fmt.Errorf("operator token: %w", err)
		}
		tmp, err := os.MkdirTemp("", "cmlab-readonly-")
		if err != nil {
			return nil, fmt.Errorf("%s is on a read-only filesystem and no private copy can be made: %w", o.Home.Dir, err)
		}
		h.onClose("remove private copy", func() error { return os.RemoveAll(tmp) })
		h.Served, h.OnROFS = home.Home{Dir: filepath.Join(tmp, "home")}, true
		n, err := o.Home.CopyTo(h.Served.Dir)
		if err != nil {
			return nil, fmt.Errorf("%s is on a read-only filesystem; copying it to serve it: %w", o.Home.Dir, err)
		}
		o.Logger.Warn("the home is on a read-only filesystem: serving a private copy, without state/daemon.json", "home", o.Home.Dir, "copy", h.Served.Dir, "bytes", n)
	} else if o.listens {
		if err := o.Home.Ensure(); err != nil {
			return nil, err
		}
	}
	if o.listens {
		// The operator token of state/token; a home reached by no socket
		// (`cmlab mcp`, a one-shot command) leaves it empty: its
		// in-process server draws its own, which never leaves this
		// process.
		if h.OperatorToken, err = h.Served.OperatorToken(); err != nil {
			return nil, fmt.Errorf("operator token: %w", err)
		}
	}

	o.trace("open engine")
	eopts := engine.Options{Home: h.Served, ReadOnly: o.ReadOnly, SegmentSize: o.SegmentSize}
	if !o.OneShot {
		eopts.FeedbackSweep, eopts.VerifyAfterOpen = feedbackSweep, true
	}
	eng, err := engine.Open(ctx, eopts)
	if err != nil {
		return nil, err
	}
	h.Engine = eng
	if rep := eng.Adopted(); rep != nil {
		// A home content-machine's Lab wrote, adopted at this first open
		// (engine/adopt.go): say what was taken and from where.
		o.Logger.Warn(rep.Summary(), "home", o.Home.Dir, "files", rep.Files, "setAside", rep.SetAside, "events", rep.Events, "resumed", rep.Resumed)
	}
	h.onClose("close engine", func() error {
		if err := eng.Close(); err != nil {
			return fmt.Errorf("closing engine: %w", err)
		}
		return nil
	})
	if !o.OneShot {
		stopVerifyLog := logVerification(eng, o.Logger)
		stopDegradedLog := logDegraded(eng, o.Logger) // daemon_events.go: the log's health, beside its verification
		h.onClose("stop verification log", func() error { stopDegradedLog(); stopVerifyLog(); return nil })
		if rep := eng.Regenerated(); rep != nil {
			// feedback.jsonl (or a salvage) left views the checkpoint did not
			// vouch for: say what regenerating them changed and moved aside.
			o.Logger.Warn("views regenerated from the log at start", "lastSeq", rep.LastSeq, "changes", rep.Changes, "setAside", rep.SetAside, "foreign", rep.Foreign)
		}
	}

	// The one step journal of this process: start-up recovery, its
	// auto-resume and the steps routes all record through it.
	o.trace("step journal")
	if h.Journal, err = steps.NewJournal(eng); err != nil {
		return nil, fmt.Errorf("step journal: %w", err)
	}

	if !o.ReadOnly && !o.OneShot {
		// Decisions are taken and recorded before serving; resumed
		// mandates run in the background (Start) under a context Close
		// cancels and waits for, before the engine closes (a step then
		// still running is killed and left executing, and the next start
		// classifies it). Their transitions come after the journal's
		// start seq, so `cmlab recover` through this daemon sees them as
		// its own runners' and leaves them alone.
		o.trace("start-up recovery")
		plan, res, err := recovery.Start(ctx, h.Journal, recovery.StartOptions{Lookback: o.Lookback, Now: o.now, Hook: o.resumeHook,
			OutputFile: recovery.ResumeOutputFile(o.Home), OnResumed: resumeLogger(o.Logger, o.Home)})
		if err != nil {
			return nil, fmt.Errorf("start-up recovery: %w", err)
		}
		h.resumer = res                     // started, and stopped at Close, by Start
		logStartupDecisions(o.Logger, plan) // daemon_events.go
		if len(plan.ClosedTerminal) > 0 {
			o.Logger.Info("start-up recovery closed terminal blocks left open", "blocks", plan.ClosedTerminal)
		}
	}

	o.trace("retention model")
	if h.Retention, err = retention.Open(eng, o.Logger); err != nil {
		return nil, fmt.Errorf("retention model: %w", err)
	}
	if o.Compaction != nil && !o.ReadOnly && !o.OneShot {
		o.trace("start compaction")
		stop := startCompaction(ctx, eng, h.Retention, o, &h.labServer)
		h.onClose("stop compaction", func() error { stop(); return nil })
	}

	if !o.ReadOnly && !o.OneShot {
		o.trace("terminal manager")
		popts := o.Pty
		popts.Dir, popts.Logger = "", o.Logger
		if h.Terminals, err = pty.NewManager(eng, popts); err != nil {
			return nil, fmt.Errorf("terminal manager: %w", err)
		}
		mgr := h.Terminals
		h.onClose("close terminals", func() error {
			cctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
			defer cancel()
			if err := mgr.Close(cctx); err != nil {
				o.Logger.Warn("closing terminals", "err", err)
			}
			return nil
		})
	}

	o.trace("http server")
	roots, unknownRoots := labRoots(o.AllowRoots, o.UnknownPeerCwd) // exposure.go
	// cmlab's own Lab page at /, unless --ui names another client.
	var page http.Handler
	if o.UIDir == "" {
		if page, err = labui.New(labui.Options{Version: o.Version}); err != nil {
			return nil, err
		}
	}
	h.Server, err = labapi.New(labapi.Options{
		Engine: eng, Journal: h.Journal, Retention: h.Retention, Listen: o.Listen, OperatorToken: h.OperatorToken,
		SessionID: "lab_" + uuid.NewString(), AllowedRoots: roots, UnknownPeerRoots: unknownRoots, ExportBudget: o.ExportBudget,
		ReadOnly: o.ReadOnly, Pty: h.Terminals,
		Version: o.Version, Logger: o.Logger, Task: o.Task, ExitAfterSubmit: o.ExitAfterSubmit,
		OnExit: o.onExit, UIDir: o.UIDir, Page: page, DaemonLogFile: DaemonLogFile(o.Home),
	})
	if err != nil {
		return nil, err
	}
	h.OperatorToken = h.Server.OperatorToken()
	srv := h.Server
	h.labServer.Store(srv)
	h.onClose("close http server", func() error { srv.Close(); return nil })
	if o.Opened != nil {
		o.Opened(h)
	}
	return h, nil
}

// LeaveTerminalModel builds the terminal's read model in a one-shot home
// (whose Open builds no terminal manager) so that its snapshot is written
// when the home closes, as a daemon's is: `cmlab rebuild`, `restore` and
// `replay --into` leave it for the next start (issue 26 item 3). It does
// so only when the log leaves no terminal block or shell open: the
// manager closes those by appending events, which is the next daemon
// start's recovery to do, not a one-shot open's (which appends nothing).
// It reports whether the model was built.
func (h *Home) LeaveTerminalModel(ctx context.Context) (bool, error) {
	if !h.opts.OneShot || h.opts.ReadOnly || h.Terminals != nil {
		return false, nil
	}
	left, err := pty.ScanLeftOpen(h.Engine.Log().Events(1))
	if err != nil {
		return false, err
	}
	if len(left.Blocks) > 0 || len(left.Shells) > 0 {
		return false, nil
	}
	popts := h.opts.Pty
	popts.Dir, popts.Logger, popts.IdleTimeout = "", h.opts.Logger, -1
	mgr, err := pty.NewManager(h.Engine, popts)
	if err != nil {
		return false, fmt.Errorf("terminal model: %w", err)
	}
	h.onClose("close terminal model", func() error { return mgr.Close(context.WithoutCancel(ctx)) })
	return true, nil
}

// Start makes an opened home live: start-up recovery's resumed mandates
// start running, and lab.session.started is appended for this run,
// naming listen (an address, or "stdio" for `cmlab mcp`). A read-only or
// one-shot home starts nothing.
func (h *Home) Start(ctx context.Context, listen string) error {
	if h.resumer != nil {
		h.opts.trace("resume mandates")
		h.resumer.Start(context.WithoutCancel(ctx))
		res := h.resumer
		h.onClose("stop resumed mandates", func() error { res.Stop(); return nil })
		if h.opts.onResumer != nil {
			h.opts.onResumer(h.resumer)
		}
	}
	if h.opts.ReadOnly || h.opts.OneShot {
		return nil
	}
	h.opts.trace("session started")
	if err := h.Server.Start(ctx, os.Getpid(), listen); err != nil {
		return fmt.Errorf("lab.session.started: %w", err)
	}
	return nil
}

// Serving tells the home it serves: only now is what the start trusted
// without reading it whole (the log's sealed segments, the views) read
// in the background, not before.
func (h *Home) Serving() {
	if h.opts.OneShot {
		return
	}
	h.opts.trace("verify after start")
	h.Engine.StartVerification()
}

// Close takes the home down in the reverse order of Open: resumed
// mandates and the compaction stop, and the terminals close, before the
// engine closes (its final checkpoint). It is safe to call more than once.
func (h *Home) Close() error {
	h.closeOnce.Do(func() {
		var errs []error
		for i := len(h.closers) - 1; i >= 0; i-- {
			c := h.closers[i]
			h.opts.trace(c.step)
			if err := c.fn(); err != nil {
				errs = append(errs, err)
			}
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

// defaults fills the documented defaults of o.
func (o *Options) defaults() {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:7788"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	if o.Lookback <= 0 {
		o.Lookback = 2 * time.Hour
	}
	if o.Version == "" {
		o.Version = labapi.Version
	}
}

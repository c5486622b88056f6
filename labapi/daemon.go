package labapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
	"github.com/google/uuid"
)

// Version is the version reported by /api/config and lab.session.started.
const Version = "0.1.0"

// DaemonOptions configure RunDaemon (the flags of `cmlab serve`).
type DaemonOptions struct {
	Home   home.Home
	Listen string // default 127.0.0.1:7788; port 0 picks a free port
	// AllowRemote permits a Listen address that is not loopback (CheckListen).
	AllowRemote bool
	// AllowRoots are extra import roots beside the working directory and its output/.
	AllowRoots      []string
	Task            *Task
	ExitAfterSubmit int
	// ReadOnly serves a replayed home: no session event, every write refused.
	ReadOnly bool
	// UIDir is served at / (the Lab's browser client: / and /lab/…), when set.
	UIDir string
	// Lookback is recovery's auto-resume window (default 2h).
	Lookback time.Duration
	Logger   *slog.Logger
	// Ready, when set, is called once the daemon listens and state/daemon.json is written.
	Ready func(info DaemonInfo)
	// ShutdownTimeout bounds the drain of in-flight requests (default 10s).
	ShutdownTimeout time.Duration
	// Compaction, when set, is the retention policy the daemon runs every
	// CompactEvery (default DefaultCompactEvery) on its log (compaction.go).
	Compaction   *compact.Options
	CompactEvery time.Duration
	// SegmentSize of the log (default wal's 4 MiB); small segments let a
	// test compact a small log.
	SegmentSize int
	// Pty configures the terminal manager (slots, idle reaping); Dir and
	// Logger are ignored.
	Pty pty.Options
	// MaxConns caps the connections held open at once (serve --max-conns);
	// 0 derives it from the open-file limit, which RunDaemon first raises
	// to its hard limit: a quarter of it, within [16, 4096] (listener.go).
	MaxConns int
	// Sidecar, when set, runs beside serving once the daemon listens (the
	// log shipper of `serve --ship`), under a context cancelled at
	// shutdown and waited for before the engine closes. Its error is
	// logged; the daemon keeps serving.
	Sidecar func(ctx context.Context) error

	onServer   func(*Server)                  // benchmarks: the server once built
	onResumer  func(*recovery.Resumer)        // tests: start-up auto-resume
	resumeHook func(steps.CrashPoint, string) // tests: the resumed runner's crash points
	now        func() time.Time               // tests: recovery's clock
}

// feedbackSweep is how often the daemon ingests complete lines other
// programs appended to feedback.jsonl when no feedback is posted.
const feedbackSweep = time.Second

// RunDaemon is `cmlab serve`: open the engine (tail repair and view
// catch-up), run start-up recovery, start the terminal manager, append
// lab.session.started, listen, write state/daemon.json; then serve until
// ctx ends (SIGINT/SIGTERM) or the task's submissions are done. Shutdown
// stops accepting, drains requests, closes the terminals, closes the engine
// (checkpoint) and removes state/daemon.json.
//
// A ReadOnly daemon whose home is on a read-only filesystem serves a
// private copy of it (home.CopyTo into a 0700 temporary directory, removed
// at the end), writes no state/daemon.json there (it cannot), and reports
// the copy's token file in DaemonInfo.
func RunDaemon(ctx context.Context, o DaemonOptions) (err error) {
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
	warning, err := CheckListen(o.Listen, o.AllowRemote)
	if err != nil {
		return err
	}
	if warning != "" {
		o.Logger.Warn(warning, "listen", o.Listen)
	}
	if info, err := ReadDaemonInfo(o.Home); err == nil {
		return fmt.Errorf("a daemon already serves this home (pid %d at %s): stop it first or use its API", info.Pid, info.Listen)
	}
	// The operator token opens a shell as this user: refuse to serve a home
	// someone else could read it from (or plant one in) before anything runs.
	served, onROFS := o.Home, o.ReadOnly && o.Home.OnReadOnlyFS()
	if onROFS {
		// The log cannot be opened on a read-only filesystem (its lock
		// file, its last segment): serve a private copy instead, which
		// nothing can make differ from the home while it stays read-only.
		if err := o.Home.CheckPrivate(); err != nil {
			return fmt.Errorf("operator token: %w", err)
		}
		tmp, err := os.MkdirTemp("", "cmlab-readonly-")
		if err != nil {
			return fmt.Errorf("%s is on a read-only filesystem and no private copy can be made: %w", o.Home.Dir, err)
		}
		defer os.RemoveAll(tmp)
		served = home.Home{Dir: filepath.Join(tmp, "home")}
		n, err := o.Home.CopyTo(served.Dir)
		if err != nil {
			return fmt.Errorf("%s is on a read-only filesystem; copying it to serve it: %w", o.Home.Dir, err)
		}
		o.Logger.Warn("the home is on a read-only filesystem: serving a private copy, without state/daemon.json", "home", o.Home.Dir, "copy", served.Dir, "bytes", n)
	} else if err := o.Home.Ensure(); err != nil {
		return err
	}
	tok, err := served.OperatorToken()
	if err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	eng, err := engine.Open(ctx, engine.Options{Home: served, ReadOnly: o.ReadOnly, FeedbackSweep: feedbackSweep, SegmentSize: o.SegmentSize, VerifyAfterOpen: true})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := eng.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing engine: %w", cerr)
		}
	}()
	stopDegradedLog := logDegraded(eng, o.Logger) // daemon_events.go
	defer stopDegradedLog()
	stopVerifyLog := logVerification(eng, o.Logger)
	defer stopVerifyLog() // before the engine closes
	if rep := eng.Regenerated(); rep != nil {
		// feedback.jsonl (or a salvage) left views the checkpoint did not
		// vouch for: say what regenerating them changed and moved aside.
		o.Logger.Warn("views regenerated from the log at start", "lastSeq", rep.LastSeq, "changes", rep.Changes, "setAside", rep.SetAside, "foreign", rep.Foreign)
	}
	// The one step journal of this daemon: start-up recovery, its
	// auto-resume and the steps routes all record through it.
	j, err := steps.NewJournal(eng)
	if err != nil {
		return fmt.Errorf("step journal: %w", err)
	}
	var res *recovery.Resumer
	if !o.ReadOnly {
		// Decisions are taken and recorded before listening; resumed
		// mandates run in the background (below) under a context this
		// function owns: cancelled and waited for at shutdown, before the
		// engine closes (a step then still running is killed and left
		// executing, and the next start classifies it). Their transitions
		// come after the journal's start seq, so `cmlab recover` through
		// this daemon sees them as its own runners' and leaves them alone.
		var plan *recovery.Plan
		plan, res, err = recovery.Start(ctx, j, recovery.StartOptions{Lookback: o.Lookback, Now: o.now, Hook: o.resumeHook,
			OutputFile: recovery.ResumeOutputFile(o.Home), OnResumed: resumeLogger(o.Logger, o.Home)})
		if err != nil {
			return fmt.Errorf("start-up recovery: %w", err)
		}
		logStartupDecisions(o.Logger, plan) // daemon_events.go
		if len(plan.ClosedTerminal) > 0 {
			o.Logger.Info("start-up recovery closed terminal blocks left open", "blocks", plan.ClosedTerminal)
		}
	}
	ret, err := OpenRetention(eng, o.Logger)
	if err != nil {
		return fmt.Errorf("retention model: %w", err)
	}
	if o.Compaction != nil && !o.ReadOnly {
		stopCompaction := startCompaction(ctx, eng, ret, o)
		defer stopCompaction() // before the engine closes
	}
	var mgr *pty.Manager
	if !o.ReadOnly {
		popts := o.Pty
		popts.Dir, popts.Logger = "", nil
		if mgr, err = pty.NewManager(eng, popts); err != nil {
			return fmt.Errorf("terminal manager: %w", err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
			defer cancel()
			if cerr := mgr.Close(cctx); cerr != nil {
				o.Logger.Warn("closing terminals", "err", cerr)
			}
		}()
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	fdLimit, ferr := raiseFDLimit()
	if ferr != nil {
		o.Logger.Warn("reading the open-file limit", "err", ferr)
		fdLimit = 1024
	}
	maxConns := o.MaxConns
	if maxConns <= 0 {
		maxConns = connCap(fdLimit)
	}
	capped := newCapListener(ln, maxConns)
	ln = capped
	o.Logger.Info("connection cap", "maxConns", maxConns, "openFileLimit", fdLimit)
	addr := ln.Addr().String()
	nonce := newSecret()
	exitCh := make(chan struct{})
	srv, err := New(Options{
		Engine: eng, Journal: j, Retention: ret, Listen: addr, OperatorToken: tok, Nonce: nonce, SessionID: "lab_" + uuid.NewString(),
		AllowedRoots: DefaultAllowedRoots(o.AllowRoots), ReadOnly: o.ReadOnly, Pty: mgr,
		Version: Version, Logger: o.Logger, Task: o.Task, ExitAfterSubmit: o.ExitAfterSubmit,
		OnExit: func() { close(exitCh) }, UIDir: o.UIDir,
	})
	if err != nil {
		ln.Close()
		return err
	}
	defer srv.Close()
	if o.onServer != nil {
		o.onServer(srv)
	}
	if res != nil {
		res.Start(context.WithoutCancel(ctx))
		defer res.Stop()
		if o.onResumer != nil {
			o.onResumer(res)
		}
	}
	if !o.ReadOnly {
		if err := srv.Start(ctx, os.Getpid(), addr); err != nil {
			ln.Close()
			return fmt.Errorf("lab.session.started: %w", err)
		}
	}
	// Header and idle timeouts bound what a silent client holds; the
	// connection cap (capped.ConnState) closes idle ones first when full.
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		ConnState: capped.ConnState, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	info := DaemonInfo{Pid: os.Getpid(), Listen: addr, TokenFile: o.Home.TokenFile(), Nonce: nonce, SessionID: srv.opts.SessionID,
		StartedAt: time.Now().UTC().Format(time.RFC3339Nano), Version: Version}
	if onROFS {
		info.TokenFile = served.TokenFile() // a copy of state/token, or one made for this run
	} else {
		if err := WriteDaemonInfo(o.Home, info); err != nil {
			hs.Close()
			return fmt.Errorf("writing state/daemon.json: %w", err)
		}
		defer RemoveDaemonInfo(o.Home, info.Pid)
	}
	o.Logger.Info("serving", "listen", addr, "session", info.SessionID, "readOnly", o.ReadOnly)
	if o.Sidecar != nil {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := o.Sidecar(sctx); err != nil {
				o.Logger.Error("sidecar stopped; the daemon keeps serving", "err", err)
			}
		}()
		defer func() { cancel(); <-done }()
	}
	if o.Ready != nil {
		o.Ready(info)
	}
	// Serving: now read what the start trusted without reading it whole
	// (the log's sealed segments, the views), not before.
	eng.StartVerification()
	select {
	case <-ctx.Done():
	case <-exitCh:
		o.Logger.Info("task submissions done; exiting", "exitAfterSubmit", o.ExitAfterSubmit)
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	srv.Close() // end event streams so Shutdown can drain
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		o.Logger.Warn("shutdown did not drain in time", "err", err)
	}
	return nil
}

// ErrRemoteListen is wrapped when --listen names an address other
// machines can reach and --allow-remote was not given.
var ErrRemoteListen = errors.New("listen address is not loopback")

// CheckListen refuses a listen address that is not loopback (an IP of
// 127.0.0.0/8 or ::1, or "localhost") unless allowRemote; with it, the
// answer is the warning to print. Anything else — 0.0.0.0, ::, an empty
// host, a LAN address, a host name — is remote: the Lab token is served
// to whoever connects, and the operator token then travels in clear text.
func CheckListen(listen string, allowRemote bool) (warning string, err error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: want host:port: %w", listen, err)
	}
	if host == "localhost" {
		return "", nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "", nil
	}
	what := host
	if host == "" || host == "0.0.0.0" || host == "::" {
		what = "every interface"
	}
	if !allowRemote {
		return "", fmt.Errorf("--listen %s: %w: it would serve %s, where other machines can fetch the Lab token and write to the Lab; fix: listen on 127.0.0.1 (the default), or pass --allow-remote if that is meant", listen, ErrRemoteListen, what)
	}
	return fmt.Sprintf("WARNING: listening on %s (%s): other machines can reach the Lab API and fetch its Lab token from /api/config, and the operator token crosses the network in clear text; use a firewall or an SSH tunnel to 127.0.0.1 instead", listen, what), nil
}

// resumeLogger logs the end of each mandate resumed at start: per step its
// status, exit code and output digest, and where its output is kept.
func resumeLogger(l *slog.Logger, h home.Home) func(string, *steps.RunResult, error) {
	return func(id string, res *steps.RunResult, err error) {
		out, _ := recovery.ResumeLogPath(h, id)
		if res != nil {
			for _, s := range res.Steps {
				code := -1
				if s.ExitCode != nil {
					code = *s.ExitCode
				}
				l.Info("resumed step", "mandate", id, "step", s.StepID, "status", s.Status, "exit_code", code,
					"output_digest", s.OutputDigest, "from_log", s.FromLog, "output", h.Rel(out))
			}
		}
		if err != nil {
			l.Warn("resumed mandate did not complete", "mandate", id, "err", err, "output", h.Rel(out))
			return
		}
		l.Info("resumed mandate completed", "mandate", id, "output", h.Rel(out))
	}
}

// logVerification logs the outcome of the engine's verification after
// open (engine.Options.VerifyAfterOpen) when it ends; the returned
// function stops waiting for it.
func logVerification(eng *engine.Engine, l *slog.Logger) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		verified, report := eng.Verified()
		select {
		case <-verified:
		case <-quit:
			return
		}
		rep := report()
		switch {
		case rep.Log.Err != nil:
			l.Error("the log is damaged before its last segment (verification after start): writes are refused; fix: cmlab stop, cmlab wal verify, cmlab recover --salvage --apply", "err", rep.Log.Err, "seconds", rep.Seconds)
		case len(rep.Damaged) > 0:
			l.Error("views damaged before their checkpoint were regenerated from the log", "damaged", rep.Damaged, "err", rep.Err, "seconds", rep.Seconds)
		case rep.Err != nil:
			l.Warn("verification of the views after start did not finish (the next start checks again)", "err", rep.Err)
		default:
			l.Info("log and views verified after start", "segments", rep.Log.Segments, "logBytes", rep.Log.Bytes, "views", rep.Views, "viewBytes", rep.Bytes, "seconds", rep.Seconds)
		}
	}()
	return func() { close(quit); <-done }
}

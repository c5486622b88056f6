package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
)

// Options configure Open and Run (the flags of `cmlab serve`). Zero
// values take the documented defaults.
type Options struct {
	Home home.Home
	// OneShot opens the home for one CLI command in this process (Dial):
	// engine, step journal, read models and the HTTP server only — no
	// start-up recovery, terminal manager, compaction, feedback sweep,
	// verification after open or session event.
	OneShot bool
	Listen  string // Run listens on it; default 127.0.0.1:7788; port 0 picks a free port
	// AllowRemote permits a Listen address that is not loopback (CheckListen).
	AllowRemote bool
	// AllowRoots are extra import roots beside the working directory and its output/.
	AllowRoots []string
	// UnknownPeerCwd gives callers whose uid is not known the working
	// directory as an import root too (content-machine's defaults;
	// exposure.go).
	UnknownPeerCwd bool
	// ExportBudget bounds lab/exports/ (0: labapi.DefaultExportBudget).
	ExportBudget int64
	// LabStreams bounds Lab-token event streams (0: ¾ of the connection cap).
	LabStreams      int
	Task            *labapi.Task
	ExitAfterSubmit int
	// ReadOnly serves a replayed home: no session event, every write refused.
	ReadOnly bool
	// UIDir is served at / (the Lab's browser client: / and /lab/…), when set.
	UIDir string
	// Version is reported by /api/config and lab.session.started
	// (default labapi.Version).
	Version string
	// Lookback is recovery's auto-resume window (default 2h).
	Lookback time.Duration
	Logger   *slog.Logger
	// Ready, when set, is called once the daemon listens and state/daemon.json is written.
	Ready func(info labapi.DaemonInfo)
	// ShutdownTimeout bounds the drain of in-flight requests and the
	// closing of the terminals (default 10s).
	ShutdownTimeout time.Duration
	// Compaction, when set, is the retention policy the daemon runs every
	// CompactEvery (default DefaultCompactEvery) on its log (compaction.go).
	Compaction   *compact.Options
	CompactEvery time.Duration
	// SegmentSize of the log (default wal's 4 MiB); small segments let a
	// test compact a small log.
	SegmentSize int
	// Pty configures the terminal manager (slots, idle reaping); Dir and
	// Logger are ignored (Logger is the daemon's).
	Pty pty.Options
	// MaxConns caps the connections held open at once (serve --max-conns);
	// 0 derives it from the open-file limit, which Run first raises
	// to its hard limit: a quarter of it, within [16, 4096] (listener.go).
	MaxConns int
	// Sidecar, when set, runs beside serving once the daemon listens (the
	// log shipper of `serve --ship`), under a context cancelled at
	// shutdown and waited for before the engine closes. Its error is
	// logged; the daemon keeps serving.
	Sidecar func(ctx context.Context) error
	// Trace, when set, is told each step of the start and stop sequence
	// as it begins (the test of their order reads it).
	Trace func(step string)
	// Opened, when set, is called with the home once Open built it
	// (benchmarks and tests reach its engine and server).
	Opened func(*Home)

	listens    bool                           // Run: the home is served on a socket
	onExit     func()                         // Run: the task's submissions are done
	onResumer  func(*recovery.Resumer)        // tests: start-up auto-resume
	resumeHook func(steps.CrashPoint, string) // tests: the resumed runner's crash points
	now        func() time.Time               // tests: recovery's clock
}

// Run is `cmlab serve`: Open the home (tail repair and view catch-up,
// start-up recovery, the terminal manager, the HTTP server), listen,
// append lab.session.started, write state/daemon.json; then serve until
// ctx ends (SIGINT/SIGTERM) or the task's submissions are done. Shutdown
// stops accepting, drains requests, stops the sidecar, removes
// state/daemon.json, then closes the home (Home.Close: resumed mandates,
// terminals and compaction stop before the engine closes with its
// checkpoint).
//
// A ReadOnly daemon whose home is on a read-only filesystem serves a
// private copy of it (home.CopyTo into a 0700 temporary directory, removed
// at the end), writes no state/daemon.json there (it cannot), and reports
// the copy's token file in DaemonInfo.
func Run(ctx context.Context, o Options) (err error) {
	o.OneShot, o.listens = false, true
	o.defaults()
	warning, err := CheckListen(o.Listen, o.AllowRemote)
	if err != nil {
		return err
	}
	if warning != "" {
		o.Logger.Warn(warning, "listen", o.Listen)
	}
	if info, err := labapi.ReadDaemonInfo(o.Home); err == nil {
		return fmt.Errorf("a daemon already serves this home (pid %d at %s): stop it first or use its API", info.Pid, info.Listen)
	}
	exitCh := make(chan struct{})
	o.onExit = func() { close(exitCh) }
	h, err := Open(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := h.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	o.trace("listen")
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
	h.Server.SetListen(addr)
	h.Server.SetLabStreams(labStreamBudget(o.LabStreams, maxConns))
	if err := h.Start(ctx, addr); err != nil {
		ln.Close()
		return err
	}
	// Header and idle timeouts bound what a silent client holds; the
	// connection cap (capped.ConnState) closes idle ones first when full.
	o.trace("serve http")
	hs := &http.Server{Handler: h.Server.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		ConnState: capped.ConnState, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 2)
	go func() { serveErr <- hs.Serve(ln) }()
	roots, unknownRoots := labRoots(o.AllowRoots, o.UnknownPeerCwd)
	info := labapi.DaemonInfo{Pid: os.Getpid(), Listen: addr, TokenFile: o.Home.TokenFile(), SessionID: h.Server.SessionID(),
		StartedAt: time.Now().UTC().Format(time.RFC3339Nano), Version: o.Version, AllowedRoots: roots, UnknownPeerRoots: unknownRoots}
	o.Logger.Info("import roots", "allowedRoots", roots, "unknownPeerRoots", unknownRoots, "labStreams", labStreamBudget(o.LabStreams, maxConns))
	if h.OnROFS {
		info.TokenFile = h.Served.TokenFile() // a copy of state/token, or one made for this run
	} else {
		// The CLI's way in: the lock, the Unix socket, state/daemon.json.
		o.trace("write daemon.json")
		adv, err := advertiseDaemon(o.Home, info, hs, capped, serveErr, o.Logger)
		if err != nil {
			hs.Close()
			return err
		}
		info = adv.Info
		defer func() {
			o.trace("remove daemon.json")
			adv.Withdraw()
		}()
	}
	o.Logger.Info("serving", "listen", addr, "session", info.SessionID, "readOnly", o.ReadOnly)
	if o.Sidecar != nil {
		o.trace("start sidecar")
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := o.Sidecar(sctx); err != nil {
				o.Logger.Error("sidecar stopped; the daemon keeps serving", "err", err)
			}
		}()
		defer func() { o.trace("stop sidecar"); cancel(); <-done }()
	}
	if o.Ready != nil {
		o.trace("ready")
		o.Ready(info)
	}
	h.Serving()
	select {
	case <-ctx.Done():
	case <-exitCh:
		o.Logger.Info("task submissions done; exiting", "exitAfterSubmit", o.ExitAfterSubmit)
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	o.trace("stop serving")
	h.Server.Close() // end event streams so Shutdown can drain
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

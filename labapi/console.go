package labapi

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cmlab/cmlab/console"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pagesec"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/cmlab/cmlab/wal"
	dto "github.com/prometheus/client_model/go"
)

// The operator console's routes (issue 30; console/doc.go):
//
//	POST /api/console/login-code  operator token only → {code, url, expiresAt}: a one-time login code
//	POST /api/console/revoke      operator token only → {ended}: ends every console session and code
//	GET  /console/login?code=     exchanges the code for the session cookie, 303 to /console/
//	GET  /console/{file...}       the console's pages (no data; CSP default-src 'self')
//	GET  /api/console/overview    health, log, snapshots, compaction, shipping, rates, review, left-open blocks, WARN/ERROR lines
//	GET  /api/console/log         a page of the log, newest first (console.LogQuery as query parameters)
//	GET  /api/console/trace?id=   what `cmlab trace ID` lists, as pages of the log
//	GET  /api/console/recovery    the recovery plan and the table `cmlab recover` prints
//
// A live session cookie opens these routes and the operator routes the
// pages call (consoleRoutes), and no other; the Lab token opens none of
// them. A write carrying the cookie must carry an Origin header (checked
// to be exactly this daemon's origin by serveHTTP), so another site's
// form or script cannot act through the operator's browser.

// consoleRoutes are the operator routes outside /api/console/ a console
// session opens; every GET /api/console/… route is opened too (the POSTs
// there, login-code and revoke, take the operator token only).
var consoleRoutes = map[string]bool{
	"GET /api/events":                                       true,
	"POST /api/console/travel":                              true,
	"POST /api/console/check":                               true,
	"GET /api/steps":                                        true,
	"POST /api/steps/{mandateId}/approve":                   true,
	"POST /api/steps/{mandateId}/failed":                    true,
	"POST /api/steps/{mandateId}/reset":                     true,
	"POST /api/steps/{mandateId}/cancel":                    true,
	"GET /api/recovery/plan":                                true,
	"POST /api/recovery/apply":                              true,
	"GET /api/pty":                                          true,
	"GET /api/pty/{conversationId}/blocks":                  true,
	"GET /api/pty/{conversationId}/status":                  true,
	"POST /api/pty/{conversationId}/send":                   true,
	"POST /api/pty/{conversationId}/interrupt":              true,
	"GET /api/pty/{conversationId}/blocks/{blockId}":        true,
	"GET /api/pty/{conversationId}/blocks/{blockId}/output": true,
}

// consoleState is a server's console: its sessions (this daemon run's,
// in memory) and the sampler of its recent rates, started by the first
// overview and stopped by Close.
type consoleState struct {
	sessions  *console.Sessions
	rates     *console.Rates
	ratesOnce sync.Once
	// crashed caches the blocks this daemon's start closed (fixed per run).
	crashedOnce sync.Once
	crashed     []crashedBlock
	// logs reads the log's pages (its buffers are reused across pages).
	logsOnce sync.Once
	logs     *console.LogReader
	// travel holds the time-travel points (console_travel.go).
	travel consoleTravel
	// sizes caches the pty size of shells (console_size.go).
	sizes shellSizes
	// playing holds a place per terminal playback (console_playback.go).
	playing chan struct{}
}

func (s *Server) logReader() *console.LogReader {
	s.console.logsOnce.Do(func() { s.console.logs = console.NewLogReader(s.opts.Engine.Log().Dir()) })
	return s.console.logs
}

// sessionOpens reports whether r, which carries no token, opens its route
// with a live console session.
func (s *Server) sessionOpens(r *http.Request) bool {
	open := consoleRoutes[r.Pattern] || strings.HasPrefix(r.Pattern, "GET /api/console/")
	return open && s.console.sessions.Valid(r)
}

// sessionWriteCheck refuses a write authenticated by the console cookie
// alone that carries no Origin (serveHTTP already refused a wrong one).
func sessionWriteCheck(r *http.Request, write bool) error {
	if write && len(r.Header.Values("Origin")) != 1 {
		return NewError(CodeForbidden, "a console action must carry the Origin header of this daemon's page",
			"Act from the console page served by this daemon, or send the operator token instead of the cookie.")
	}
	return nil
}

func (s *Server) registerConsoleRoutes() {
	s.console.sessions = console.NewSessions(s.opts.Console)
	s.route("POST /api/console/login-code", authAlwaysRead, s.consoleLoginCode)
	s.route("POST /api/console/revoke", authAlwaysRead, s.consoleRevoke)
	s.route("GET /console/login", authNone, s.consoleLogin)
	s.route("GET /console", authNone, func(w http.ResponseWriter, r *http.Request) error {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return nil
	})
	s.route("GET /console/{file...}", authNone, s.consoleAsset)
	s.route("GET /api/console/overview", authAlways, s.consoleOverview)
	s.route("GET /api/console/log", authAlways, s.consoleLog)
	s.route("GET /api/console/trace", authAlways, s.consoleTrace)
	s.route("GET /api/console/recovery", authAlways, s.consoleRecovery)
	s.registerConsolePtyRoutes()
	s.registerConsoleTravelRoutes()
}

// consoleRecovery answers GET /api/console/recovery: the recovery plan
// GET /api/recovery/plan gives, classified now, with the table `cmlab
// recover` prints for it.
func (s *Server) consoleRecovery(w http.ResponseWriter, r *http.Request) error {
	p := recovery.Recover(s.opts.Journal, recovery.PlanOptions{UnderDaemon: true, LiveAfter: s.opts.Journal.StartSeq()})
	var b strings.Builder
	if err := p.WriteTable(&b); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Plan *recovery.Plan `json:"plan"`
		Text string         `json:"text"`
	}{p, b.String()})
	return nil
}

// ConsoleLogin is the answer of POST /api/console/login-code.
type ConsoleLogin struct {
	Code      string `json:"code"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"`
}

func (s *Server) consoleLoginCode(w http.ResponseWriter, r *http.Request) error {
	code, exp := s.console.sessions.NewCode()
	host := s.opts.Listen
	if h, p, err := net.SplitHostPort(host); err == nil && (h == "" || h == "0.0.0.0" || h == "::") {
		host = "127.0.0.1:" + p
	}
	writeJSON(w, http.StatusOK, ConsoleLogin{Code: code, URL: "http://" + host + "/console/login?code=" + code,
		ExpiresAt: exp.UTC().Format(time.RFC3339)})
	return nil
}

func (s *Server) consoleRevoke(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]int{"ended": s.console.sessions.Revoke()})
	return nil
}

func (s *Server) consoleLogin(w http.ResponseWriter, r *http.Request) error {
	console.SecurityHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	id, err := s.console.sessions.Exchange(r.URL.Query().Get("code"))
	if err != nil {
		return NewError(CodeUnauthorized, "this console login code is unknown, expired or already used",
			"Run cmlab open again: a code is valid 60 s, once, and only for the daemon run that issued it.")
	}
	http.SetCookie(w, console.Cookie(id))
	w.Header().Set("Location", "/console/")
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

func (s *Server) consoleAsset(w http.ResponseWriter, r *http.Request) error {
	if !console.ServeAsset(w, r, r.PathValue("file")) {
		pagesec.NotFound(w)
	}
	return nil
}

// ConsoleOverview is the answer of GET /api/console/overview.
type ConsoleOverview struct {
	Health   Health `json:"health"`
	Version  string `json:"version"`
	Home     string `json:"home"`
	ReadOnly bool   `json:"readOnly"`
	Log      struct {
		Bytes           int64  `json:"bytes"`
		Segments        int    `json:"segments"`
		FirstSeq        uint64 `json:"firstSeq"`
		LastSeq         uint64 `json:"lastSeq"`
		CheckpointSeq   uint64 `json:"checkpointSeq"`
		CheckpointLag   uint64 `json:"checkpointLag"`
		CheckpointError string `json:"checkpointError,omitempty"`
		ViewsError      string `json:"viewsError,omitempty"`
		ViewsLag        uint64 `json:"viewsLag"`
	} `json:"log"`
	Snapshots  []consoleFile             `json:"snapshots"`
	Compaction *wal.Manifest             `json:"compaction"`
	Ship       *consoleShip              `json:"ship"`
	Rates      console.RateSummary       `json:"rates"`
	Review     []string                  `json:"awaitingReview"`
	OpenBlocks []pty.LeftBlock           `json:"openBlocks"`
	Crashed    []crashedBlock            `json:"crashLeftBlocks"`
	LogLines   []string                  `json:"logLines"`
	Sessions   struct{ Live, Codes int } `json:"sessions"`
}

type consoleFile struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	ModTime string `json:"modTime"`
}

type consoleShip struct {
	cursor.State
	Lag uint64 `json:"lag"`
}

// crashedBlock is a terminal block a crash left open, closed by this
// daemon's start (pty.block.end with reason daemon_crashed).
type crashedBlock struct {
	ConversationID string       `json:"conversation_id"`
	Seq            uint64       `json:"seq"`
	Block          events.Block `json:"block"`
}

func (s *Server) consoleOverview(w http.ResponseWriter, r *http.Request) error {
	eng := s.opts.Engine
	h := eng.Home()
	lg := eng.Log()
	var o ConsoleOverview
	o.Health = Health{Status: "ok", WalIndex: lg.LastSeq(), ReadOnly: s.opts.ReadOnly}
	if err := s.errFn(); err != nil {
		o.Health.Status, o.Health.Cause, o.Health.Fix = "degraded", err.Error(), degradedError(err).Fix()
	}
	o.Version, o.Home, o.ReadOnly = s.opts.Version, h.Dir, s.opts.ReadOnly
	o.Log.FirstSeq, o.Log.LastSeq = lg.FirstSeq(), lg.LastSeq()
	if segs, err := wal.Segments(lg.Dir()); err == nil {
		for _, sg := range segs {
			o.Log.Bytes += sg.Size
		}
		o.Log.Segments = len(segs)
	}
	if seq, present, err := projections.ReadCheckpointSeq(h); err != nil {
		o.Log.CheckpointError = err.Error()
	} else if present {
		o.Log.CheckpointSeq = seq
		if o.Log.LastSeq > seq {
			o.Log.CheckpointLag = o.Log.LastSeq - seq
		}
	}
	if err := eng.ViewsErr(); err != nil {
		o.Log.ViewsError = err.Error()
		o.Health.Views, o.Health.ViewsCause = "behind", err.Error()
	}
	if cov := s.opts.Retention.Covered(); o.Log.LastSeq > cov {
		o.Log.ViewsLag = o.Log.LastSeq - cov
	}
	o.Snapshots = []consoleFile{}
	dir := filepath.Dir(retention.SnapshotFile(h))
	if des, err := os.ReadDir(dir); err == nil {
		for _, de := range des {
			if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() {
				o.Snapshots = append(o.Snapshots, consoleFile{Name: h.Rel(filepath.Join(dir, de.Name())), Bytes: fi.Size(),
					ModTime: fi.ModTime().UTC().Format(time.RFC3339)})
			}
		}
	}
	if m, err := wal.ReadManifest(lg.Dir()); err == nil {
		o.Compaction = m
	}
	if st, err := cursor.Read(h); err == nil {
		st.LastSeq = max(st.LastSeq, o.Log.LastSeq)
		o.Ship = &consoleShip{State: st, Lag: st.Lag()}
	}
	o.Rates = s.consoleRates()
	o.Review = s.opts.Retention.AwaitingReview()
	if o.Review == nil {
		o.Review = []string{}
	}
	o.OpenBlocks = s.opts.Retention.OpenBlocks()
	o.Crashed = s.crashedBlocks(r.Context())
	o.LogLines = []string{}
	if s.opts.DaemonLogFile != "" {
		o.LogLines = recentProblems(s.opts.DaemonLogFile, 64<<10, 30)
	}
	o.Sessions.Live, o.Sessions.Codes = s.console.sessions.Count()
	writeJSON(w, http.StatusOK, o)
	return nil
}

// consoleRates starts the sampler on first use (under the server's
// lifetime) and summarises the window.
func (s *Server) consoleRates() console.RateSummary {
	s.console.ratesOnce.Do(func() {
		s.console.rates = console.NewRates(10*time.Second, 30, s.rateSample)
		go s.console.rates.Run(s.closing)
	})
	return s.console.rates.Summary(s.rateSample())
}

// rateSample reads the counters /metrics serves: the log's appends and
// the API's acknowledgement latency histogram.
func (s *Server) rateSample() console.Sample {
	smp := console.Sample{At: time.Now(), Appends: s.opts.Engine.Log().Stats().Appends}
	var m dto.Metric
	if err := s.metrics.appendLat.Write(&m); err == nil && m.Histogram != nil {
		smp.Count = m.Histogram.GetSampleCount()
		for _, b := range m.Histogram.Bucket {
			smp.Bounds = append(smp.Bounds, b.GetUpperBound())
			smp.Counts = append(smp.Counts, b.GetCumulativeCount())
		}
	}
	return smp
}

// crashedBlocks lists the blocks this daemon's start-up recovery closed
// because a crash left them open: the pty.block.end events with reason
// daemon_crashed it appended after the journal's start seq, before this
// run's lab.session.started (at most a bounded read of the log).
func (s *Server) crashedBlocks(ctx context.Context) []crashedBlock {
	s.console.crashedOnce.Do(func() {
		s.console.crashed = []crashedBlock{}
		from := s.opts.Journal.StartSeq() + 1
		n := 0
		for ev, err := range s.opts.Engine.Log().Events(from) {
			if err != nil || n > 100000 || ev.Type == events.TypeLabSessionStarted {
				break
			}
			n++
			if ev.Type != events.TypePtyBlockEnd {
				continue
			}
			p, err := events.DecodeAs[*events.PtyBlockEnd](ev)
			if err == nil && p.Block.Reason == pty.ReasonDaemonCrashed {
				s.console.crashed = append(s.console.crashed, crashedBlock{ConversationID: ev.Stream, Seq: ev.Seq, Block: p.Block})
			}
		}
	})
	return s.console.crashed
}

// recentProblems returns the last max WARN and ERROR lines of the daemon
// log file, reading at most tail bytes of its end.
func recentProblems(path string, tail int64, max int) []string {
	out := []string{}
	b, size, err := home.ReadTail(path, tail)
	if err != nil {
		return out
	}
	if size > int64(len(b)) {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") ||
			strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

func (s *Server) consoleLog(w http.ResponseWriter, r *http.Request) error {
	q, err := parseLogQuery(r)
	if err != nil {
		return err
	}
	lg := s.opts.Engine.Log()
	v := r.URL.Query()
	// A jump to a time goes through the retention model's timestamp index.
	if at := strings.TrimSpace(v.Get("at")); at != "" {
		ts, err := parseTime(at)
		if err != nil {
			return NewError(CodeInvalidArgument, "at: "+err.Error(), "Give a time as RFC 3339 (2026-11-28T14:02:00Z) or ms since the epoch.")
		}
		seq, err := s.opts.Retention.FirstTS(r.Context(), lg.Events, lg.FirstSeq(), lg.LastSeq(), func(t int64) bool { return t > ts })
		if err != nil {
			return err
		}
		if seq != 0 {
			q.Before = seq
		} else {
			q.Before = 0
		}
	}
	page, err := s.logReader().Page(r.Context(), lg.FirstSeq(), lg.LastSeq(), q)
	if err != nil {
		return err
	}
	// The event types, for a live tail (the event stream names each
	// event by its type).
	writeJSON(w, http.StatusOK, struct {
		console.LogPage
		Types []string `json:"types"`
	}{page, events.Types()})
	return nil
}

func parseLogQuery(r *http.Request) (console.LogQuery, error) {
	v := r.URL.Query()
	q := console.LogQuery{TypePrefix: strings.TrimSpace(v.Get("type")),
		Req: strings.TrimSpace(v.Get("req")), Mandate: strings.TrimSpace(v.Get("mandate")), Conv: strings.TrimSpace(v.Get("conv"))}
	num := func(name string) (uint64, error) {
		s := strings.TrimSpace(v.Get(name))
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, NewError(CodeInvalidArgument, name+" must be a whole number, not "+truncate(s, 40), "Give a seq (a positive integer).").With("field", name)
		}
		return n, nil
	}
	var err error
	if q.Before, err = num("before"); err != nil {
		return q, err
	}
	if seq, err := num("seq"); err != nil {
		return q, err
	} else if seq > 0 {
		q.Before = seq + 1 // jump: the page starts at seq
	}
	lim, err := num("limit")
	if err != nil {
		return q, err
	}
	if lim > console.MaxPageSize {
		return q, NewError(CodeInvalidArgument, "limit is at most "+strconv.Itoa(console.MaxPageSize), "Page with before= instead.").With("field", "limit")
	}
	q.Limit = int(lim)
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"from", &q.FromTS}, {"to", &q.ToTS}} {
		if s := strings.TrimSpace(v.Get(f.name)); s != "" {
			ts, err := parseTime(s)
			if err != nil {
				return q, NewError(CodeInvalidArgument, f.name+": "+err.Error(), "Give a time as RFC 3339 or ms since the epoch.").With("field", f.name)
			}
			*f.dst = ts
		}
	}
	if id := strings.TrimSpace(v.Get("id")); id != "" && r.URL.Path != "/api/console/trace" {
		q.IDs = []string{id}
	}
	return q, nil
}

// parseTime reads RFC 3339 or ms since the epoch.
func parseTime(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, errors.New("not a time: " + truncate(s, 40))
	}
	return t.UnixMilli(), nil
}

// consoleTrace answers GET /api/console/trace?id=[&before=]: what `cmlab
// trace ID` lists, as pages of the log newest first (console.LogQuery
// with IDs): the events that name the id, and, for a request id, those
// naming the ids its response handed out (read from the request index,
// not the log); "MANDATE/STEP" lists that step's events.
func (s *Server) consoleTrace(w http.ResponseWriter, r *http.Request) error {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	if id == "" || len(id) > 300 {
		return NewError(CodeInvalidArgument, "id is required (at most 300 characters)", "Give a request, feedback, run, experiment, block, mandate or conversation id, or MANDATE/STEP.")
	}
	q, err := parseLogQuery(r)
	if err != nil {
		return err
	}
	related := []string{}
	if m, st, ok := strings.Cut(id, "/"); ok && m != "" && st != "" && !strings.Contains(st, "/") {
		q.Mandate, q.Step = m, st
	} else {
		q.IDs = []string{id}
		if rec, ok, err := s.idem.idx.Lookup(id); err == nil && ok {
			if rel := console.RelatedIDs(rec.Resp); rel != nil {
				related = rel
				q.IDs = append(q.IDs, rel...)
			}
		}
	}
	lg := s.opts.Engine.Log()
	page, err := s.logReader().Page(r.Context(), lg.FirstSeq(), lg.LastSeq(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string   `json:"id"`
		Related []string `json:"related"`
		console.LogPage
	}{id, related, page})
	return nil
}

package labapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/google/uuid"
)

// registerLabRoutes registers the Lab routes of SPEC §6.
func (s *Server) registerLabRoutes() {
	s.route("GET /api/config", authNone, s.handleConfig)
	s.route("GET /api/health", authNone, s.handleHealth)
	s.route("GET /metrics", authAlways, s.handleMetrics)
	s.route("GET /api/session", authPostOnly, s.handleSession)

	s.route("GET /api/feedback", authPostOnly, s.handleFeedbackPoll)
	s.route("POST /api/feedback", authPostOnly, s.handleFeedbackAdd)

	s.route("POST /api/runs/import", authPostOnly, s.handleRunsImport)
	s.route("GET /api/runs", authPostOnly, s.handleRunsList)
	s.route("GET /api/runs/{runId}", authPostOnly, s.handleRunGet)
	s.route("GET /api/runs/{runId}/video", authPostOnly, s.handleRunVideo)
	s.route("GET /api/runs/{runId}/artifact/{name}", authPostOnly, s.handleRunArtifact)
	s.route("GET /api/runs/{runId}/feedback", authPostOnly, s.handleRunFeedback) // feedback_index.go

	s.route("POST /api/experiments", authPostOnly, s.handleExperimentCreate)
	s.route("GET /api/experiments", authPostOnly, s.handleExperimentsList)
	s.route("GET /api/experiments/{experimentId}", authPostOnly, s.handleExperimentGet)
	s.route("POST /api/experiments/{experimentId}/submit", authPostOnly, s.handleExperimentSubmit)

	s.route("POST /api/export", authPostOnly, s.handleExport)
	s.route("GET /api/exports/{name}", authPostOnly, s.handleExportDownload) // export_download.go

	if s.opts.UIDir != "" {
		// content-machine's layout (src/lab/server/static.ts): the page at
		// / and /index.html, its assets under /lab/ (index.html loads
		// /lab/app.css and /lab/app.js).
		s.route("GET /{$}", authNone, s.handleUI)
		s.route("GET /index.html", authNone, s.handleUI)
		s.route("GET /lab/{path...}", authNone, s.handleUI)
	} else if s.opts.Page != nil {
		// cmlab's own Lab (package labui): the page at /, its assets under /ui/.
		page := func(w http.ResponseWriter, r *http.Request) error { s.opts.Page.ServeHTTP(w, r); return nil }
		s.route("GET /{$}", authNone, page)
		s.route("GET /ui/{path...}", authNone, page)
	}
}

// handleUI serves the Lab's browser client from Options.UIDir as
// content-machine does: 200 with its Content-Type table and Cache-Control
// no-store, or the plain-text 404 of every non-API path. Files are opened
// inside UIDir (package confine: no "..", no symlink, regular files only); names
// starting with a dot are not served.
func (s *Server) handleUI(w http.ResponseWriter, r *http.Request) error {
	rel := "index.html"
	if strings.HasPrefix(r.URL.Path, "/lab/") {
		rel = r.PathValue("path")
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "" || strings.HasPrefix(seg, ".") {
			notFoundText(w)
			return nil
		}
	}
	// Opened once through package confine: no symlink followed, never a
	// FIFO or device (which would block the request's thread).
	dir, err := filepath.EvalSymlinks(s.opts.UIDir)
	if err == nil {
		dir, err = filepath.Abs(dir)
	}
	if err != nil {
		notFoundText(w)
		return nil
	}
	f, err := confine.Open(dir, rel)
	if err != nil {
		if ae := transientFileError(err); ae != nil {
			return ae
		}
		notFoundText(w)
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		notFoundText(w)
		return nil
	}
	w.Header().Set("Content-Type", uiContentType(rel))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		io.Copy(w, f)
	}
	return nil
}

// uiContentType is content-machine's table (contentTypeForPath).
func uiContentType(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "application/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".ico":
		return "image/x-icon"
	}
	return "application/octet-stream"
}

// notFoundText is content-machine's answer for a path outside /api/ that
// serves nothing: 404, body "Not found", no Content-Type.
func notFoundText(w http.ResponseWriter) {
	w.Header()["Content-Type"] = nil // no sniffed type either
	w.Header().Set("Content-Length", "9")
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, "Not found")
}

func newID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		return prefix + uuid.NewString()
	}
	return prefix + id.String()
}

// --- config, health, session ---

type configResponse struct {
	SessionID               string   `json:"sessionId"`
	Token                   string   `json:"token"`
	Version                 string   `json:"version"`
	RunnerEnabled           bool     `json:"runnerEnabled"`
	RunnerAllowNetwork      bool     `json:"runnerAllowNetwork"`
	RunnerAllowWorkflowExec bool     `json:"runnerAllowWorkflowExec"`
	AllowedRoots            []string `json:"allowedRoots"`
	UI                      struct {
		BlindMetricsDefault  bool `json:"blindMetricsDefault"`
		RevealMetricsEnabled bool `json:"revealMetricsEnabled"`
	} `json:"ui"`
	Task            *Task `json:"task"`
	ExitAfterSubmit int   `json:"exitAfterSubmit"`
	ReadOnly        bool  `json:"readOnly,omitempty"`
}

func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) error {
	c := configResponse{SessionID: s.opts.SessionID, Token: s.opts.LabToken, Version: s.opts.Version,
		AllowedRoots: append([]string{}, s.opts.AllowedRoots...), Task: s.opts.Task,
		ExitAfterSubmit: s.opts.ExitAfterSubmit, ReadOnly: s.opts.ReadOnly}
	c.UI.BlindMetricsDefault, c.UI.RevealMetricsEnabled = true, true
	writeJSON(w, http.StatusOK, c)
	return nil
}

// Health is the answer of GET /api/health.
type Health struct {
	Status   string `json:"status"` // ok | degraded
	Cause    string `json:"cause,omitempty"`
	Fix      string `json:"fix,omitempty"`
	WalIndex uint64 `json:"walIndex"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Views is "behind" while the views lag the log (a projection failed
	// after its events were made durable; they catch up by themselves),
	// with ViewsCause. The log and every acknowledged write are intact.
	Views      string `json:"views,omitempty"`
	ViewsCause string `json:"viewsCause,omitempty"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	h := Health{Status: "ok", WalIndex: s.opts.Engine.Log().LastSeq(), ReadOnly: s.opts.ReadOnly}
	if err := s.errFn(); err != nil {
		h.Status, h.Cause = "degraded", err.Error()
		h.Fix = degradedError(err).Fix()
	}
	if err := s.opts.Engine.ViewsErr(); err != nil {
		h.Views, h.ViewsCause = "behind", err.Error()
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) error {
	started := s.startedAt.UnixMilli()
	if ts, ok := s.lab.sessionStarted(s.opts.SessionID); ok {
		started = ts
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"sessionId": s.opts.SessionID,
		"startedAt": events.FormatISO(started),
		"walIndex":  s.opts.Engine.Log().LastSeq(),
	})
	return nil
}

// --- feedback ---

func (s *Server) handleFeedbackPoll(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Has("wait") {
		return s.feedbackLongPoll(w, r, q.Get("wait")) // feedback_wait.go
	}
	page, err := PollFeedback(s.opts.Engine.Home().FeedbackFile(), q.Get("since"), strings.TrimSpace(q.Get("sessionId")), parseLimit(q.Get("limit")))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

type feedbackBody struct {
	RequestID    any             `json:"requestId"`
	RunID        string          `json:"runId"`
	ExperimentID string          `json:"experimentId"`
	VariantID    string          `json:"variantId"`
	Topic        string          `json:"topic"`
	Ratings      json.RawMessage `json:"ratings"`
	Notes        string          `json:"notes"`
	Tags         []string        `json:"tags"`
	Answers      json.RawMessage `json:"answers"`
}

var ratingKeys = []string{"overall", "hook", "pacing", "script", "visuals", "motion", "captions", "sync"}

// parseRatings validates ratings: an object whose keys are the eight
// dimensions and whose values are integers 0–100 (null means absent).
// content-machine drops bad values silently; cmlab rejects them.
func parseRatings(raw json.RawMessage, field string) (*events.Ratings, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, NewError(CodeInvalidArgument, field+" must be an object of integer ratings 0–100", "Send {\"overall\": 80, …} with keys "+strings.Join(ratingKeys, ", ")+".").With("field", field)
	}
	out := &events.Ratings{}
	slots := map[string]**int{"overall": &out.Overall, "hook": &out.Hook, "pacing": &out.Pacing, "script": &out.Script,
		"visuals": &out.Visuals, "motion": &out.Motion, "captions": &out.Captions, "sync": &out.Sync}
	n := 0
	for k, v := range m {
		slot, ok := slots[k]
		if !ok {
			return nil, NewError(CodeInvalidArgument, "Unknown rating "+strconv.Quote(k), "Rate only "+strings.Join(ratingKeys, ", ")+".").With("field", field+"."+k)
		}
		if string(v) == "null" {
			continue
		}
		var f float64
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || json.Unmarshal(v, &f) != nil {
			return nil, NewError(CodeInvalidArgument, "Rating "+k+" must be an integer 0–100, not "+truncate(string(v), 40), "Send whole numbers from 0 to 100.").With("field", field+"."+k)
		}
		if f != math.Trunc(f) || f < 0 || f > 100 {
			return nil, NewError(CodeInvalidArgument, "Rating "+k+" must be an integer 0–100, not "+truncate(string(v), 40), "Send whole numbers from 0 to 100.").With("field", field+"."+k)
		}
		iv := int(f)
		*slot = &iv
		n++
	}
	if n == 0 {
		return nil, nil
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// compactObject checks that raw is a JSON object (or absent/null) and
// compacts it so the event's bytes do not depend on client whitespace.
func compactObject(raw json.RawMessage, field string) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, NewError(CodeInvalidArgument, field+" must be an object", "Send "+field+" as a JSON object.").With("field", field)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, NewError(CodeInvalidJSON, field+" is not valid JSON", "Send a JSON object.")
	}
	return buf.Bytes(), nil
}

func cleanTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// checkID validates an entity id sent by a client (path-safe, bounded).
func checkID(field, id string) error {
	if err := home.ValidateID(id); err != nil {
		return NewError(CodeInvalidArgument, "Invalid "+field+": "+strconv.Quote(truncate(id, 140)), "Use the id returned by the API ([A-Za-z0-9_.-], at most 128 characters).").With("field", field)
	}
	return nil
}

// runSnapshot fills a feedback entry's run-derived fields as
// content-machine does at the moment of rating (deriveRunSnapshotForFeedback
// in src/lab/server/server.ts): the run directory is discovered again and
// the metrics recomputed from the reports now present, so reports written
// after the import count. The values go into the event; a replay writes
// them back and never reads the run directory.
func runSnapshot(e *events.FeedbackEntry, run events.LabRun, roots []string) {
	e.Topic = run.Topic
	e.ArtifactsDir = run.ArtifactsDir
	d := discover(run.ArtifactsDir, run.ArtifactsDirRealpath, roots)
	e.VideoPath = d.video
	if e.VideoPath == "" {
		e.VideoPath = run.VideoPath
	}
	if d.syncReport != "" || d.captionReport != "" || d.score != "" {
		e.Reports = &events.FeedbackReports{SyncReportPath: d.syncReport, CaptionReportPath: d.captionReport, ScorePath: d.score}
	}
	e.AutoMetricsSnapshot = events.SnapshotOf(autoMetrics(d))
}

func (s *Server) handleFeedbackAdd(w http.ResponseWriter, r *http.Request) error {
	return decodeIdempotent(s, w, r, "POST /api/feedback", func(b *feedbackBody, req, rh string) (any, error) {
		e := events.FeedbackEntry{SchemaVersion: 1, ID: newID("fb_"), SessionID: s.opts.SessionID}
		if b.RunID = strings.TrimSpace(b.RunID); b.RunID != "" {
			if err := checkID("runId", b.RunID); err != nil {
				return nil, err
			}
			run, ok := s.lab.run(b.RunID)
			if !ok {
				return nil, runNotFound(b.RunID)
			}
			e.RunID = run.RunID
			runSnapshot(&e, run, s.importRoots(r))
		}
		if e.Topic == "" {
			e.Topic = strings.TrimSpace(b.Topic)
		}
		if b.ExperimentID = strings.TrimSpace(b.ExperimentID); b.ExperimentID != "" {
			if err := checkID("experimentId", b.ExperimentID); err != nil {
				return nil, err
			}
			e.ExperimentID = b.ExperimentID
		}
		if b.VariantID = strings.TrimSpace(b.VariantID); b.VariantID != "" {
			if err := checkID("variantId", b.VariantID); err != nil {
				return nil, err
			}
			e.VariantID = b.VariantID
		}
		var err error
		if e.Ratings, err = parseRatings(b.Ratings, "ratings"); err != nil {
			return nil, err
		}
		e.Notes = strings.TrimSpace(b.Notes)
		e.Tags = cleanTags(b.Tags)
		if e.Answers, err = compactObject(b.Answers, "answers"); err != nil {
			return nil, err
		}
		if e.RunID == "" && e.Ratings == nil && e.Notes == "" && e.ExperimentID == "" {
			return nil, NewError(CodeInvalidArgument, "Empty feedback: nothing to record", "Send at least runId, ratings or notes.")
		}
		resp := map[string]string{"feedbackId": e.ID}
		if err := s.appendAnswer(r.Context(), s.opts.SessionID, &events.FeedbackSubmitted{Entry: e}, req, rh, resp); err != nil {
			return nil, err
		}
		if t := s.opts.Task; t != nil && t.Type == "review" && e.RunID != "" && t.RunID == e.RunID {
			s.countSubmit()
		}
		return resp, nil
	})
}

// countSubmit counts a submission for the task and calls OnExit once the
// configured number is reached.
func (s *Server) countSubmit() {
	n := s.submits.Add(1)
	if s.opts.ExitAfterSubmit > 0 && n >= int64(s.opts.ExitAfterSubmit) && s.opts.OnExit != nil {
		s.exitOnce.Do(s.opts.OnExit)
	}
}

// --- runs ---

type importBody struct {
	RequestID any    `json:"requestId"`
	Path      string `json:"path"`
	Topic     string `json:"topic"`
}

func (s *Server) handleRunsImport(w http.ResponseWriter, r *http.Request) error {
	return decodeIdempotent(s, w, r, "POST /api/runs/import", func(b *importBody, req, rh string) (any, error) {
		path := strings.TrimSpace(b.Path)
		if path == "" {
			return nil, NewError(CodeInvalidArgument, "Missing path", `Send { "path": "/abs/path/to/artifacts-or-video" }`)
		}
		if strings.ContainsRune(path, 0) {
			return nil, NewError(CodeInvalidArgument, "Invalid path: contains a NUL byte", "Send a file system path.")
		}
		t, err := resolveImport(path, s.importRoots(r))
		if err != nil {
			return nil, err
		}
		// Only what the caller could read itself (peer.go).
		if err := s.checkImportReadable(r, t.realDir, s.importRoots(r), t.videoPath); err != nil {
			return nil, err
		}
		roots := s.importRoots(r)
		d := discover(t.artifactsDir, t.realDir, roots)
		if err := s.checkImportReadable(r, t.realDir, roots, d.video, d.script, d.timestamps, d.visuals, d.score, d.syncReport, d.captionReport); err != nil {
			return nil, err
		}
		if t.videoPath != "" {
			if _, err := confine.StatLinked(t.realDir, filepath.Base(t.videoPath), roots); err != nil {
				if ae := transientFileError(err); ae != nil {
					return nil, ae
				}
				return nil, NewError(CodeInvalidArgument, "Not a regular file: "+path,
					"Import a video file itself (symlinks are not followed) or its artifacts directory.").With("path", path)
			}
			d.video = t.videoPath
		}
		if !d.any() {
			return nil, NewError(CodeInvalidArgument, "No recognizable artifacts found in directory",
				"Import an artifacts directory containing at least video.mp4 or script.json (or import a .mp4 path).").With("artifactsDir", t.artifactsDir)
		}
		fp := &events.RunFingerprint{Video: fileStat(t.realDir, d.video, roots), Script: fileStat(t.realDir, d.script, roots)}
		if fp.Video == nil && fp.Script == nil {
			fp = nil // content-machine records no fingerprint then
		}
		s.importMu.Lock()
		defer s.importMu.Unlock()
		prev, seen := s.lab.runByRealpath(t.realDir)
		if seen && sameFingerprint(prev.Fingerprint, fp) {
			resp := map[string]string{"runId": prev.RunID}
			if req != "" {
				if err := s.appendAnswer(r.Context(), s.opts.SessionID, &events.IdempotencyRecorded{Kind: "import", EntityID: prev.RunID}, req, rh, resp); err != nil {
					return nil, err
				}
			}
			return resp, nil
		}
		// The topic is read from script.json (content-machine); a topic in
		// the body is a cmlab extension, used when the script names none.
		topic := scriptTopic(d)
		if topic == "" {
			topic = strings.TrimSpace(b.Topic)
		}
		// reports is always present, {} when no report was found, as
		// content-machine writes it.
		run := events.LabRun{SchemaVersion: 1, RunID: newID("run_"), SessionID: s.opts.SessionID,
			Topic: topic, ArtifactsDir: t.artifactsDir, ArtifactsDirRealpath: t.realDir,
			Fingerprint: fp, VideoPath: d.video, AutoMetricsSummary: autoMetrics(d),
			Reports: &events.RunReports{SyncReportPath: d.syncReport, CaptionReportPath: d.captionReport, ScorePath: d.score}}
		resp := map[string]string{"runId": run.RunID}
		if seen {
			run.SupersedesRunID = prev.RunID
			resp["supersedesRunId"] = prev.RunID
		}
		if err := s.appendAnswer(r.Context(), s.opts.SessionID, &events.RunImported{Run: run}, req, rh, resp); err != nil {
			return nil, err
		}
		return resp, nil
	})
}

func summaryOrNulls(m *events.AutoMetricsSummary) any {
	if m == nil {
		return map[string]any{"syncRating": nil, "captionOverall": nil, "proxyScoreOverall": nil}
	}
	return m
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) handleRunsList(w http.ResponseWriter, r *http.Request) error {
	if lq, paged, err := parseListQuery(r.URL.Query(), runSorts...); err != nil {
		return err
	} else if paged {
		return s.handleRunsPage(w, lq) // paging.go
	}
	writeJSON(w, http.StatusOK, runsListBody(s.lab))
	return nil
}

// runsListBody is the answer of GET /api/runs from st.
func runsListBody(st *labState) map[string]any {
	items := []map[string]any{}
	for _, run := range st.runList() {
		items = append(items, map[string]any{
			"runId": run.RunID, "sessionId": run.SessionID, "createdAt": run.CreatedAt,
			"topic": nullable(run.Topic), "artifactsDir": run.ArtifactsDir, "videoPath": nullable(run.VideoPath),
			"autoMetricsSummary": summaryOrNulls(run.AutoMetricsSummary),
		})
	}
	return map[string]any{"items": items, "nextCursor": nil}
}

func (s *Server) lookupRun(r *http.Request) (events.LabRun, error) {
	id := r.PathValue("runId")
	if err := checkID("runId", id); err != nil {
		return events.LabRun{}, err
	}
	run, ok := s.lab.run(id)
	if !ok {
		return events.LabRun{}, runNotFound(id)
	}
	return run, nil
}

// runNotFound is content-machine's answer for an unknown run id, on every
// route that names one (getLabRunById): 404 NOT_FOUND.
func runNotFound(id string) error {
	return NewError(CodeNotFound, "Run not found: "+id, "List runs with GET /api/runs; import the run first (POST /api/runs/import).").With("runId", id)
}

func (s *Server) handleRunGet(w http.ResponseWriter, r *http.Request) error {
	run, err := s.lookupRun(r)
	if err != nil {
		return err
	}
	d := discovered{}
	summary := run.AutoMetricsSummary
	if u, _, checked := s.fileReader(r); !checked || confine.SearchableBy(run.ArtifactsDirRealpath, u) == nil {
		// What the directory holds now, for a caller who could look.
		d = discover(run.ArtifactsDir, run.ArtifactsDirRealpath, s.importRoots(r))
		summary = autoMetrics(d)
	}
	video := d.video
	if video == "" {
		video = run.VideoPath
	}
	body := map[string]any{
		"runId": run.RunID, "sessionId": run.SessionID, "createdAt": run.CreatedAt, "topic": nullable(run.Topic),
		"artifactsDir": run.ArtifactsDir, "videoPath": nullable(video),
		"artifacts": map[string]any{"script": d.script != "", "timestamps": d.timestamps != "", "visuals": d.visuals != "",
			"score": d.score != "", "reports": map[string]bool{"sync": d.syncReport != "", "caption": d.captionReport != ""}},
		"autoMetricsSummary": summaryOrNulls(summary),
	}
	if len(d.refused) > 0 {
		body["refused"] = d.refused // cmlab's addition: why a linked artifact is not taken
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) handleRunVideo(w http.ResponseWriter, r *http.Request) error {
	run, err := s.lookupRun(r)
	if err != nil {
		return err
	}
	notFound := NewError(CodeNotFound, "Video not found for run", "Render a video or import a .mp4 file path; it must be a regular file inside the run's artifacts directory (symlinks are not followed).").With("runId", run.RunID)
	video := run.VideoPath
	if video == "" {
		video = discover(run.ArtifactsDir, run.ArtifactsDirRealpath, s.importRoots(r)).video
	}
	if video == "" || filepath.Dir(video) != filepath.Clean(run.ArtifactsDir) {
		return notFound
	}
	// Opened once beneath the run's real path, checked as opened, served
	// from that descriptor (package confine): no check-then-reopen race.
	f, err := s.openRunFile(r, run.ArtifactsDirRealpath, filepath.Base(video))
	if err != nil {
		if errors.Is(err, confine.ErrAccess) {
			return accessError(err)
		}
		if ae := transientFileError(err); ae != nil {
			return ae
		}
		return notFound
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return notFound
	}
	w.Header().Set("Content-Type", "video/mp4")
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Cache-Control", "no-store")
	// Ranges as content-machine reads them (range.go), then ServeContent
	// answers HEAD, the full file or the single range (206).
	if normalizeVideoRange(w, r, fi.Size()) {
		return nil
	}
	http.ServeContent(w, r, "", time.Time{}, f)
	return nil
}

// maxArtifact is the largest JSON artifact served.
const maxArtifact = 64 << 20

func (s *Server) handleRunArtifact(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !artifactAllowed(name) {
		return NewError(CodeForbidden, "Artifact name not allowed: "+truncate(name, 140), "Request one of script.json, timestamps.json, visuals.json, score.json, sync-report.json, caption-report.json, caption-quality.json, caption-settings.json (or their -attemptN variants).").With("name", truncate(name, 140))
	}
	run, err := s.lookupRun(r)
	if err != nil {
		return err
	}
	b, err := s.readRunFile(r, run.ArtifactsDirRealpath, name, maxArtifact)
	switch {
	case errors.Is(err, confine.ErrAccess):
		return accessError(err)
	case errors.Is(err, confine.ErrTooLarge):
		return NewError(CodeInvalidArgument, "Artifact too large to serve: "+name, "Read it from the artifacts directory directly.")
	case err != nil:
		if ae := transientFileError(err); ae != nil {
			return ae
		}
		return NewError(CodeNotFound, "Artifact not found: "+name, "The run has no such artifact (a regular file in its artifacts directory; symlinks are not followed).").With("runId", run.RunID).With("name", name)
	}
	if !json.Valid(b) {
		return NewError(CodeInternal, "Artifact is not valid JSON: "+name, "Regenerate the artifact.").With("name", name)
	}
	var buf bytes.Buffer
	json.Compact(&buf, b)
	writeRaw(w, http.StatusOK, buf.Bytes())
	return nil
}

// --- experiments ---

type experimentBody struct {
	RequestID     any               `json:"requestId"`
	Name          string            `json:"name"`
	Hypothesis    string            `json:"hypothesis"`
	Topic         string            `json:"topic"`
	BaselineRunID string            `json:"baselineRunId"`
	Variants      json.RawMessage   `json:"variants"`
	Questions     []events.Question `json:"questions"`
}

type variantBody struct {
	Label string `json:"label"`
	RunID string `json:"runId"`
}

func (s *Server) handleExperimentCreate(w http.ResponseWriter, r *http.Request) error {
	return decodeIdempotent(s, w, r, "POST /api/experiments", func(b *experimentBody, req, rh string) (any, error) {
		base := strings.TrimSpace(b.BaselineRunID)
		if base == "" {
			return nil, NewError(CodeInvalidArgument, "Missing baselineRunId", "Send { baselineRunId, variants: [{ label, runId }] }")
		}
		if err := checkID("baselineRunId", base); err != nil {
			return nil, err
		}
		if _, ok := s.lab.run(base); !ok {
			return nil, runNotFound(base)
		}
		var vin []variantBody
		vraw := bytes.TrimSpace(b.Variants)
		if len(vraw) > 0 && vraw[0] == '[' {
			var items []json.RawMessage
			if json.Unmarshal(vraw, &items) != nil {
				return nil, NewError(CodeInvalidArgument, "variants must be an array of { label, runId }", "Provide variants as [{ label, runId }].")
			}
			for _, it := range items {
				var v variantBody
				if err := json.Unmarshal(it, &v); err != nil {
					return nil, NewError(CodeInvalidArgument, "variants must be an array of { label, runId }", "Provide variants as [{ label, runId }].")
				}
				vin = append(vin, v)
			}
		}
		if len(vin) == 0 {
			return nil, NewError(CodeInvalidArgument, "Missing variants", "Provide at least one variant runId.")
		}
		var variants []events.Variant
		for _, v := range vin {
			runID := strings.TrimSpace(v.RunID)
			if runID == "" {
				continue
			}
			if err := checkID("variants.runId", runID); err != nil {
				return nil, err
			}
			if _, ok := s.lab.run(runID); !ok {
				return nil, runNotFound(runID)
			}
			label := strings.TrimSpace(v.Label)
			if label == "" {
				label = "B"
			}
			variants = append(variants, events.Variant{VariantID: newID("var_"), Label: label, RunID: runID})
		}
		if len(variants) == 0 {
			return nil, NewError(CodeInvalidArgument, "No valid variants provided", "Provide variants as [{ label, runId }].")
		}
		// Questions stay nil (omitted from the record) when none were sent.
		var questions []events.Question
		if b.Questions != nil {
			questions = []events.Question{}
		}
		seenQ := map[string]bool{}
		for _, q := range b.Questions {
			q.ID, q.Prompt = strings.TrimSpace(q.ID), strings.TrimSpace(q.Prompt)
			if q.ID == "" || q.Prompt == "" || (q.Type != "yes_no_unsure" && q.Type != "text") || seenQ[q.ID] {
				return nil, NewError(CodeInvalidArgument, "Invalid question: each needs a unique id, a prompt and type \"yes_no_unsure\" or \"text\"", "Send questions as [{ id, prompt, type }].")
			}
			seenQ[q.ID] = true
			questions = append(questions, q)
		}
		name := strings.TrimSpace(b.Name)
		if name == "" {
			name = "A/B Compare"
		}
		exp := events.LabExperiment{SchemaVersion: 1, ExperimentID: newID("exp_"), SessionID: s.opts.SessionID,
			Name: name, Hypothesis: strings.TrimSpace(b.Hypothesis), Topic: strings.TrimSpace(b.Topic),
			BaselineRunID: base, Variants: variants, Status: "queued", Questions: questions, Sparse: true}
		resp := map[string]string{"experimentId": exp.ExperimentID}
		if err := s.appendAnswer(r.Context(), s.opts.SessionID, &events.ExperimentCreated{Experiment: exp}, req, rh, resp); err != nil {
			return nil, err
		}
		return resp, nil
	})
}

func (s *Server) handleExperimentsList(w http.ResponseWriter, r *http.Request) error {
	if lq, paged, err := parseListQuery(r.URL.Query(), experimentSorts...); err != nil {
		return err
	} else if paged {
		return s.handleExperimentsPage(w, lq) // paging.go
	}
	items := []map[string]any{}
	for _, e := range s.lab.experimentList() {
		items = append(items, map[string]any{"experimentId": e.ExperimentID, "sessionId": e.SessionID,
			"createdAt": e.CreatedAt, "name": e.Name, "topic": nullable(e.Topic), "status": e.Status})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": nil})
	return nil
}

func (s *Server) lookupExperiment(id string) (events.LabExperiment, error) {
	if err := checkID("experimentId", id); err != nil {
		return events.LabExperiment{}, err
	}
	exp, ok := s.lab.experiment(id)
	if !ok {
		return events.LabExperiment{}, NewError(CodeNotFound, "Experiment not found: "+id, "List experiments with GET /api/experiments.").With("experimentId", id)
	}
	return exp, nil
}

func (s *Server) handleExperimentGet(w http.ResponseWriter, r *http.Request) error {
	exp, err := s.lookupExperiment(r.PathValue("experimentId"))
	if err != nil {
		return err
	}
	if exp.Questions == nil && !exp.Sparse {
		exp.Questions = []events.Question{}
	}
	writeJSON(w, http.StatusOK, exp)
	return nil
}

type submitBody struct {
	RequestID       any               `json:"requestId"`
	WinnerVariantID any               `json:"winnerVariantId"`
	Reason          any               `json:"reason"`
	Answers         json.RawMessage   `json:"answers"`
	PerRun          []json.RawMessage `json:"perRun"`
}

type perRunBody struct {
	RunID     string          `json:"runId"`
	VariantID string          `json:"variantId"`
	Ratings   json.RawMessage `json:"ratings"`
	Notes     string          `json:"notes"`
	Tags      []string        `json:"tags"`
}

func (s *Server) handleExperimentSubmit(w http.ResponseWriter, r *http.Request) error {
	expID := r.PathValue("experimentId")
	return decodeIdempotent(s, w, r, "POST /api/experiments/"+expID+"/submit", func(b *submitBody, req, rh string) (any, error) {
		s.submitMu.Lock()
		defer s.submitMu.Unlock()
		exp, err := s.lookupExperiment(expID)
		if err != nil {
			return nil, err
		}
		if exp.Status == "done" {
			return nil, NewError(CodeInvalidArgument, "Experiment already submitted", "Create a new experiment (new experimentId) for another rating pass.").With("experimentId", exp.ExperimentID)
		}
		entries, err := s.normalizePerRun(exp, b.PerRun, s.importRoots(r))
		if err != nil {
			return nil, err
		}
		winner := ""
		if ws, ok := b.WinnerVariantID.(string); ok {
			winner = strings.TrimSpace(ws)
		} else if b.WinnerVariantID != nil {
			return nil, NewError(CodeInvalidArgument, "Invalid winnerVariantId", `Use "baseline" or a variantId from GET /api/experiments/:id.`).With("experimentId", exp.ExperimentID)
		}
		if winner != "" {
			ok := winner == "baseline"
			for _, v := range exp.Variants {
				ok = ok || v.VariantID == winner
			}
			if !ok {
				return nil, NewError(CodeInvalidArgument, "Invalid winnerVariantId: "+truncate(winner, 140), `Use "baseline" or a variantId from GET /api/experiments/:id.`).With("experimentId", exp.ExperimentID)
			}
		}
		reason := ""
		if rs, ok := b.Reason.(string); ok {
			reason = strings.TrimSpace(rs)
		}
		answers, err := compactObject(b.Answers, "answers")
		if err != nil {
			return nil, err
		}
		resp := struct {
			ExperimentID string   `json:"experimentId"`
			FeedbackIDs  []string `json:"feedbackIds"`
		}{ExperimentID: exp.ExperimentID, FeedbackIDs: []string{}}
		for i := range entries {
			entries[i].Answers = answers
			resp.FeedbackIDs = append(resp.FeedbackIDs, entries[i].ID)
		}
		updated := exp
		if winner != "" {
			updated.Winner = &events.Winner{VariantID: winner, Reason: reason}
		}
		if answers != nil {
			updated.Answers = answers
		}
		updated.Status, updated.UpdatedAt = "done", ""
		if err := s.appendAnswer(r.Context(), s.opts.SessionID, &events.ExperimentSubmitted{Experiment: updated, Feedback: entries}, req, rh, resp); err != nil {
			return nil, err
		}
		if t := s.opts.Task; t != nil && t.Type == "compare" && t.ExperimentID == exp.ExperimentID {
			s.countSubmit()
		}
		return resp, nil
	})
}

// normalizePerRun applies content-machine's perRun rules, in its order.
func (s *Server) normalizePerRun(exp events.LabExperiment, in []json.RawMessage, roots []string) ([]events.FeedbackEntry, error) {
	if len(in) == 0 {
		return nil, NewError(CodeInvalidArgument, "Missing perRun ratings", "Send { perRun: [{ runId, ratings, notes, tags }] }")
	}
	variantByRun := map[string]events.Variant{}
	for _, v := range exp.Variants {
		variantByRun[v.RunID] = v
	}
	seen := map[string]bool{}
	var out []events.FeedbackEntry
	for _, raw := range in {
		var pr perRunBody
		if err := json.Unmarshal(raw, &pr); err != nil {
			return nil, NewError(CodeInvalidArgument, "perRun entries must be objects { runId, variantId, ratings, notes, tags }", "Send { perRun: [{ runId, ratings, notes, tags }] }")
		}
		runID := strings.TrimSpace(pr.RunID)
		if runID == "" {
			continue
		}
		_, isVariant := variantByRun[runID]
		if runID != exp.BaselineRunID && !isVariant {
			return nil, NewError(CodeInvalidArgument, "RunId is not part of this experiment: "+truncate(runID, 140), "Only submit perRun ratings for the baseline and variant runIds in the experiment.").With("experimentId", exp.ExperimentID).With("runId", truncate(runID, 140))
		}
		if seen[runID] {
			return nil, NewError(CodeInvalidArgument, "Duplicate perRun entry for runId: "+runID, "Provide at most one perRun entry per runId.").With("experimentId", exp.ExperimentID).With("runId", runID)
		}
		seen[runID] = true
		given := strings.TrimSpace(pr.VariantID)
		variantID := "baseline"
		if v, ok := variantByRun[runID]; ok {
			if given != "" && given != v.VariantID {
				return nil, NewError(CodeInvalidArgument, "VariantId does not match experiment variant", "Use the variantId from GET /api/experiments/:id for that runId.").
					With("experimentId", exp.ExperimentID).With("runId", runID).With("expectedVariantId", v.VariantID).With("variantId", truncate(given, 140))
			}
			variantID = v.VariantID
		} else if given != "" && given != "baseline" {
			return nil, NewError(CodeInvalidArgument, `Baseline perRun entry must use variantId "baseline" (or omit it)`, `Send variantId "baseline" for the baseline run.`).
				With("experimentId", exp.ExperimentID).With("runId", runID).With("variantId", truncate(given, 140))
		}
		ratings, err := parseRatings(pr.Ratings, "perRun.ratings")
		if err != nil {
			return nil, err
		}
		e := events.FeedbackEntry{SchemaVersion: 1, ID: newID("fb_"), SessionID: s.opts.SessionID, RunID: runID,
			ExperimentID: exp.ExperimentID, VariantID: variantID, Ratings: ratings, Notes: strings.TrimSpace(pr.Notes), Tags: cleanTags(pr.Tags)}
		if run, ok := s.lab.run(runID); ok {
			runSnapshot(&e, run, roots)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, NewError(CodeInvalidArgument, "No valid perRun entries provided", "Send { perRun: [{ runId, ratings, notes, tags }] }")
	}
	if !seen[exp.BaselineRunID] {
		return nil, NewError(CodeInvalidArgument, "Missing baseline perRun entry", "Include a perRun entry for the baselineRunId.").With("experimentId", exp.ExperimentID).With("baselineRunId", exp.BaselineRunID)
	}
	anyVariant := false
	for _, v := range exp.Variants {
		anyVariant = anyVariant || seen[v.RunID]
	}
	if !anyVariant {
		return nil, NewError(CodeInvalidArgument, "Missing variant perRun entry", "Include at least one perRun entry for a variant runId.").With("experimentId", exp.ExperimentID)
	}
	return out, nil
}

// --- export ---

type exportBody struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
}

func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) error {
	// With a request id, a retry returns the first export's answer instead
	// of writing another file; the id is recorded by an idempotency.recorded
	// event (the export itself is a file, not a log mutation).
	return decodeIdempotent(s, w, r, "POST /api/export", func(b *exportBody, req, rh string) (any, error) {
		sid := strings.TrimSpace(b.SessionID)
		if sid == "" {
			return nil, NewError(CodeInvalidArgument, "Missing sessionId", `Send { "sessionId": "lab_..." }`)
		}
		if err := checkID("sessionId", sid); err != nil {
			return nil, err
		}
		root := s.opts.Engine.Home().ExportsDir()
		if err := os.MkdirAll(root, home.DirPerm); err != nil {
			return nil, err
		}
		target := filepath.Join(root, "export-"+sid+"-"+strconv.FormatInt(time.Now().UnixMilli(), 10)+".json")
		if p := strings.TrimSpace(b.Path); p != "" {
			if !filepath.IsAbs(p) {
				p = filepath.Join(root, p)
			}
			var err error
			if target, err = exportTarget(root, filepath.Clean(p)); err != nil {
				return nil, err
			}
		}
		// A session this home never had would export as an empty file.
		if dir, err := s.opts.Engine.Home().SessionDir(sid); err != nil {
			return nil, err
		} else if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, NewError(CodeNotFound, "Unknown session: "+sid, "Export a session listed under lab/sessions/ of the home.").With("sessionId", sid)
		}
		out, count, err := s.buildExport(sid)
		if err != nil {
			return nil, err
		}
		s.exportMu.Lock()
		defer s.exportMu.Unlock()
		if err := s.checkExportBudget(root, target, len(out)); err != nil {
			return nil, err
		}
		if err := home.WriteFileAtomic(target, out); err != nil {
			return nil, NewError(CodeInternal, "Writing export failed: "+err.Error(), "Check free space under lab/exports/.")
		}
		resp := map[string]any{"path": target, "count": count}
		if req != "" {
			if err := s.appendAnswer(r.Context(), s.opts.SessionID, &events.IdempotencyRecorded{Kind: "export", EntityID: filepath.Base(target)}, req, rh, resp); err != nil {
				return nil, err
			}
		}
		return resp, nil
	})
}

// exportTarget confines p to the exports directory, by real path.
func exportTarget(root, p string) (string, error) {
	forbidden := NewError(CodeForbidden, "Export path must be under the Lab exports directory", "Choose a path under "+root+" (lab/exports/ in the cmlab home), or omit path.").With("exportRoot", root)
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", forbidden
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, home.DirPerm); err != nil {
		return "", forbidden
	}
	dirReal, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", forbidden
	}
	if r2, err := filepath.Rel(rootReal, dirReal); err != nil || r2 == ".." || strings.HasPrefix(r2, ".."+string(filepath.Separator)) {
		return "", forbidden
	}
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		return "", forbidden
	}
	return filepath.Join(dirReal, filepath.Base(p)), nil
}

// buildExport is content-machine's export document (handleExportRoute in
// src/lab/server/server.ts, LabExportSchema): the session's experiments
// (last record of each, in the order they first appeared), its feedback
// entries in file order, and the runs of the session or named by those
// experiments or entries, newest first; two-space indented, no final
// newline, as JSON.stringify(payload, null, 2) writes it.
func (s *Server) buildExport(sid string) ([]byte, int, error) {
	exps := []events.LabExperiment{}
	for _, e := range s.lab.experimentsByFirstAppearance() {
		if e.SessionID == sid {
			exps = append(exps, e)
		}
	}
	feedback := []json.RawMessage{}
	if err := scanFeedback(s.opts.Engine.Home().FeedbackFile(), func(line json.RawMessage, e *events.FeedbackEntry) {
		if e.SessionID == sid {
			feedback = append(feedback, line)
		}
	}); err != nil {
		return nil, 0, err
	}
	runIDs := map[string]bool{}
	for _, e := range exps {
		runIDs[e.BaselineRunID] = true
		for _, v := range e.Variants {
			runIDs[v.RunID] = true
		}
	}
	for _, line := range feedback {
		var e struct {
			RunID string `json:"runId"`
		}
		if json.Unmarshal(line, &e) == nil && e.RunID != "" {
			runIDs[e.RunID] = true
		}
	}
	runs := []events.LabRun{}
	for _, run := range s.lab.runList() {
		if run.SessionID == sid || runIDs[run.RunID] {
			runs = append(runs, run)
		}
	}
	doc := struct {
		SchemaVersion int                    `json:"schemaVersion"`
		ExportedAt    string                 `json:"exportedAt"`
		SessionID     string                 `json:"sessionId"`
		Runs          []events.LabRun        `json:"runs"`
		Experiments   []events.LabExperiment `json:"experiments"`
		Feedback      []json.RawMessage      `json:"feedback"`
	}{1, events.FormatISO(time.Now().UnixMilli()), sid, runs, exps, feedback}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // JSON.stringify does not escape <, > and &
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, 0, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), len(feedback), nil
}

// scanFeedback calls fn for every valid complete entry of the store.
func scanFeedback(path string, fn func(line json.RawMessage, e *events.FeedbackEntry)) error {
	page, err := PollFeedback(path, "0", "", 0)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) {
			return nil
		}
		return err
	}
	for _, line := range page.Items {
		var e events.FeedbackEntry
		if json.Unmarshal(line, &e) == nil {
			fn(line, &e)
		}
	}
	return nil
}

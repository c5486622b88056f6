package labapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/events"
)

// Lab routes: runs (LAB-API.md).

type importBody struct {
	RequestID any    `json:"requestId"`
	Path      string `json:"path"`
	Topic     string `json:"topic"`
}

func (s *Server) handleRunsImport(w http.ResponseWriter, r *http.Request) error {
	return decodeIdempotent(s, w, r, "POST /api/runs/import", func(b *importBody, req, rh string) (any, error) {
		path, err := required("path", b.Path, `Send { "path": "/abs/path/to/artifacts-or-video" }`)
		if err != nil {
			return nil, err
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
		prev, seen, err := s.lab.runByRealpath(t.realDir)
		if err != nil {
			return nil, labStoreError(err)
		}
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
	return serveList(s, w, s.lab.eachRun(true), runListItem)
}

func (s *Server) lookupRun(r *http.Request) (events.LabRun, error) {
	return lookup("runId", r.PathValue("runId"), s.lab.run, runNotFound)
}

// lookup is the Lab store's record of id (field: the id's name), by get:
// an invalid id, a failure of the store and an unknown id (notFound) are
// the route's answers.
func lookup[T any](field, id string, get func(id string) (T, bool, error), notFound func(id string) error) (T, error) {
	var none T
	if err := checkID(field, id); err != nil {
		return none, err
	}
	rec, ok, err := get(id)
	if err != nil {
		return none, labStoreError(err)
	}
	if !ok {
		return none, notFound(id)
	}
	return rec, nil
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

package labapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// Lab routes: export (LAB-API.md).

type exportBody struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
}

func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) error {
	// With a request id, a retry returns the first export's answer instead
	// of writing another file; the id is recorded by an idempotency.recorded
	// event (the export itself is a file, not a log mutation).
	return decodeIdempotent(s, w, r, "POST /api/export", func(b *exportBody, req, rh string) (any, error) {
		sid, err := requiredID("sessionId", b.SessionID, `Send { "sessionId": "lab_..." }`)
		if err != nil {
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
	if err := s.lab.eachExperimentByAppearance(func(e *events.LabExperiment) bool {
		if e.SessionID == sid {
			exps = append(exps, *e)
		}
		return true
	}); err != nil {
		return nil, 0, labStoreError(err)
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
	if err := s.lab.eachRun(true)(func(_ []byte, run *events.LabRun) bool {
		if run.SessionID == sid || runIDs[run.RunID] {
			runs = append(runs, *run)
		}
		return true
	}); err != nil {
		return nil, 0, labStoreError(err)
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

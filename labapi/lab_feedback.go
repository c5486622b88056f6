package labapi

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// Lab routes: feedback (LAB-API.md).

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

// feedbackFields are feedbackBody's JSON names: a plain key equal to none
// of them but equal under case folding is left to json.Unmarshal.
var feedbackFields = [...]string{"requestId", "runId", "experimentId", "variantId", "topic", "ratings", "notes", "tags", "answers"}

// decodeMembers fills b from a plain body's members as json.Unmarshal
// does (membersDecoder); the request id is read by requestID, so
// RequestID stays unset.
func (b *feedbackBody) decodeMembers(members []jsonMember) bool {
	for _, m := range members {
		var str *string
		switch string(m.key) {
		case "requestId":
			continue
		case "runId":
			str = &b.RunID
		case "experimentId":
			str = &b.ExperimentID
		case "variantId":
			str = &b.VariantID
		case "topic":
			str = &b.Topic
		case "notes":
			str = &b.Notes
		case "ratings":
			b.Ratings = m.value
			continue
		case "answers":
			b.Answers = m.value
			continue
		case "tags":
			if string(m.value) == "null" {
				continue
			}
			if m.value[0] != '[' || json.Unmarshal(m.value, &b.Tags) != nil {
				return false
			}
			continue
		default:
			for _, f := range feedbackFields {
				if strings.EqualFold(string(m.key), f) {
					return false
				}
			}
			continue
		}
		if string(m.value) == "null" {
			continue
		}
		v, ok := stringValue(m.value)
		if !ok && (m.value[0] != '"' || json.Unmarshal(m.value, &v) != nil) {
			return false
		}
		*str = v
	}
	return true
}

var ratingKeys = []string{"overall", "hook", "pacing", "script", "visuals", "motion", "captions", "sync"}

// parseRatings validates ratings: an object whose keys are the eight
// dimensions and whose values are integers 0–100 (null means absent).
// content-machine drops bad values silently; cmlab rejects them.
func parseRatings(raw json.RawMessage, field string) (*events.Ratings, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	// A plain object (jsonbody.go) is read in place, any other through a
	// map as json.Unmarshal reads it.
	var m map[string]json.RawMessage
	var members []jsonMember
	plain := false
	if json.Valid(raw) {
		members, plain = splitObject(raw, make([]jsonMember, 0, len(ratingKeys)))
	}
	if !plain {
		members = nil
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, NewError(CodeInvalidArgument, field+" must be an object of integer ratings 0–100", "Send {\"overall\": 80, …} with keys "+strings.Join(ratingKeys, ", ")+".").With("field", field)
		}
		for k, v := range m {
			members = append(members, jsonMember{key: []byte(k), value: v})
		}
	}
	out := &events.Ratings{}
	n := 0
	for _, mem := range members {
		v := mem.value
		slot := ratingSlot(out, mem.key)
		if slot == nil {
			k := string(mem.key)
			return nil, NewError(CodeInvalidArgument, "Unknown rating "+strconv.Quote(k), "Rate only "+strings.Join(ratingKeys, ", ")+".").With("field", field+"."+k)
		}
		if string(v) == "null" {
			continue
		}
		iv, ok := ratingValue(v)
		if !ok {
			k := string(mem.key)
			return nil, NewError(CodeInvalidArgument, "Rating "+k+" must be an integer 0–100, not "+truncate(string(v), 40), "Send whole numbers from 0 to 100.").With("field", field+"."+k)
		}
		*slot = &iv
		n++
	}
	if n == 0 {
		return nil, nil
	}
	return out, nil
}

// ratingValue is the rating the JSON value v holds: an integer 0–100 in
// any number notation. v is a JSON number once its first byte says so
// (the object it came from parsed), which ParseFloat reads as
// json.Unmarshal would; out of range it fails there too, and is refused
// alike.
func ratingValue(v []byte) (int, bool) {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > 100 {
		return 0, false
	}
	return int(f), true
}

// ratingSlot is the field of r that rating k fills, nil for an unknown k.
func ratingSlot[K string | []byte](r *events.Ratings, k K) **int {
	switch string(k) {
	case "overall":
		return &r.Overall
	case "hook":
		return &r.Hook
	case "pacing":
		return &r.Pacing
	case "script":
		return &r.Script
	case "visuals":
		return &r.Visuals
	case "motion":
		return &r.Motion
	case "captions":
		return &r.Captions
	case "sync":
		return &r.Sync
	}
	return nil
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

// required is the value of a body's required field, trimmed, or the
// answer that it is missing (hint: what to send).
func required(field, v, hint string) (string, error) {
	if v = strings.TrimSpace(v); v == "" {
		return "", NewError(CodeInvalidArgument, "Missing "+field, hint)
	}
	return v, nil
}

// requiredID is a body's required id field, trimmed and checked
// (checkID).
func requiredID(field, v, hint string) (string, error) {
	v, err := required(field, v, hint)
	if err != nil {
		return "", err
	}
	return v, checkID(field, v)
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
			run, ok, err := s.lab.run(b.RunID)
			if err != nil {
				return nil, labStoreError(err)
			}
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
		// The answer is encoded once, for the log's snapshot and the
		// client alike: what json.Marshal makes of {"feedbackId": id}
		// (newID's characters need no escaping).
		resp := json.RawMessage(`{"feedbackId":"` + e.ID + `"}`)
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

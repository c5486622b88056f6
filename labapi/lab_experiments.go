package labapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cmlab/cmlab/events"
)

// Lab routes: experiments (LAB-API.md).

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
		base, err := requiredID("baselineRunId", b.BaselineRunID, "Send { baselineRunId, variants: [{ label, runId }] }")
		if err != nil {
			return nil, err
		}
		if _, ok, err := s.lab.run(base); err != nil {
			return nil, labStoreError(err)
		} else if !ok {
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
			if _, ok, err := s.lab.run(runID); err != nil {
				return nil, labStoreError(err)
			} else if !ok {
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
	return serveList(s, w, s.lab.eachExperiment(true), experimentListItem)
}

func (s *Server) lookupExperiment(id string) (events.LabExperiment, error) {
	return lookup("experimentId", id, s.lab.experiment, experimentNotFound)
}

// experimentNotFound is the answer for an unknown experiment id: 404
// NOT_FOUND.
func experimentNotFound(id string) error {
	return NewError(CodeNotFound, "Experiment not found: "+id, "List experiments with GET /api/experiments.").With("experimentId", id)
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
		run, ok, err := s.lab.run(runID)
		if err != nil {
			return nil, labStoreError(err)
		}
		if ok {
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

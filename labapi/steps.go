package labapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
)

// Step routes (SPEC §6/§8): the durable step journal over HTTP, so that
// `cmlab run`, `cmlab step …` and other programs record transitions through
// the daemon, the single writer. Bodies use the step event fields:
//
//	POST /api/steps/{mandateId}/plan       {name?, steps:[{step_id, tool, params_hash, pre_hash?, expected_post_hash?, idem_key?, world?, dir?}], spec?}
//	POST /api/steps/{mandateId}/executing  {step_id, observed_pre_hash, idem_key?, pid?, pid_start?, boot_id?}
//	POST /api/steps/{mandateId}/completed  {step_id, post_hash, result_hash, exit_code?, output_digest?}
//	POST /api/steps/{mandateId}/failed     {step_id, error_class, error_msg, exit_code?}   (error_msg cut to 500 characters)
//	POST /api/steps/{mandateId}/review     {step_id, reason, evidence?}
//	POST /api/steps/{mandateId}/reset      {step_id, reason?}                              (back to pending, same idem_key)
//	POST /api/steps/{mandateId}/cancel     {reason?}                                       (mandate.cancelled: no step starts again, auto-resume skips it)
//	→ {mandateId, stepId, status, idemKey?}
//	GET  /api/steps?mandateId=             {mandate} or, without mandateId, {mandates}
//	GET  /api/recovery/plan                the recovery plan, classified now
//	POST /api/recovery/apply               apply it (steps of runners of this daemon are left alone)
//
// Transitions are validated against the state rebuilt from the log
// (steps.CheckTransition) and appended by the daemon's one step journal
// (Options.Journal), under the lock its start-up recovery and auto-resume
// take too, so no transition is accepted from a stale state; a request id
// makes them idempotent.
func (s *Server) registerStepRoutes() {
	st := &stepRoutes{s: s, j: s.opts.Journal}
	s.route("GET /api/steps", authAlways, st.list)
	for _, tr := range stepTransitions {
		s.route("POST /api/steps/{mandateId}/"+tr.name, authAlways, st.transition(tr.name, tr.payload))
	}
	s.registerStepApprove()
	s.route("GET /api/recovery/plan", authAlways, st.plan)
	s.route("POST /api/recovery/apply", authAlways, st.apply)
}

type stepRoutes struct {
	s *Server
	j *steps.Journal
}

// stepTransitions are the transition routes, in the order they are
// registered, each with a new empty payload of its event and that
// payload's mandate id field.
var stepTransitions = []struct {
	name    string
	payload func() (events.Payload, *string)
}{
	{"plan", func() (events.Payload, *string) { p := &events.StepPlanned{}; return p, &p.MandateID }},
	{"executing", func() (events.Payload, *string) { p := &events.StepExecuting{}; return p, &p.MandateID }},
	{"completed", func() (events.Payload, *string) { p := &events.StepCompleted{}; return p, &p.MandateID }},
	{"failed", func() (events.Payload, *string) { p := &events.StepFailed{}; return p, &p.MandateID }},
	{"review", func() (events.Payload, *string) { p := &events.StepNeedsReview{}; return p, &p.MandateID }},
	{"reset", func() (events.Payload, *string) { p := &events.StepReset{}; return p, &p.MandateID }},
	{"cancel", func() (events.Payload, *string) { p := &events.MandateCancelled{}; return p, &p.MandateID }},
}

func (st *stepRoutes) transition(tr string, newPayload func() (events.Payload, *string)) handlerFunc {
	route := "POST /api/steps/{mandateId}/" + tr
	return func(w http.ResponseWriter, r *http.Request) error {
		mid := r.PathValue("mandateId")
		body, err := readBody(r)
		if err != nil {
			return err
		}
		return st.s.idempotent(w, r, strings.Replace(route, "{mandateId}", mid, 1), body, func(req, rh string) (any, error) {
			if err := home.ValidateID(mid); err != nil {
				return nil, NewError(CodeInvalidArgument, "mandateId: "+err.Error(), "Use 1–128 characters of [A-Za-z0-9_.-].")
			}
			p, mandate := newPayload()
			if err := decodeJSON(body, p); err != nil {
				return nil, err
			}
			// The path's mandate id goes into p; a different one in the body is an error.
			if *mandate != "" && *mandate != mid {
				return nil, NewError(CodeInvalidArgument, "body mandate_id differs from the path's "+mid, "Leave mandate_id out of the body or make it match the path.")
			}
			*mandate = mid
			resp, err := st.j.RecordRequest(r.Context(), p, req, rh)
			if err != nil {
				return nil, mapError(onSteps, err)
			}
			return resp, nil
		})
	}
}

func (st *stepRoutes) list(w http.ResponseWriter, r *http.Request) error {
	body, err := stepsListBody(st.j.State(), r.URL.Query().Get("mandateId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// stepsListBody is the answer of GET /api/steps[?mandateId=id] from state.
func stepsListBody(state *steps.State, id string) (any, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		ms := state.Mandates()
		if ms == nil {
			ms = []*steps.MandateState{}
		}
		return map[string]any{"mandates": ms}, nil
	}
	if err := home.ValidateID(id); err != nil {
		return nil, NewError(CodeInvalidArgument, "mandateId: "+err.Error(), "Use 1–128 characters of [A-Za-z0-9_.-].")
	}
	m := state.Mandate(id)
	if m == nil {
		return nil, NewError(CodeNotFound, "no mandate "+id, "GET /api/steps lists every mandate.").With("mandateId", id)
	}
	return map[string]any{"mandate": m}, nil
}

func (st *stepRoutes) plan(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, recovery.Recover(st.j, recovery.PlanOptions{UnderDaemon: true, LiveAfter: st.j.StartSeq()}))
	return nil
}

// apply takes a request id like every mutating route: the recovery.applied
// event carries it with the response, so a retry gets that answer back and
// applies nothing. (A plan with nothing to apply appends nothing and
// records nothing: its retry plans again, and again applies nothing.)
func (st *stepRoutes) apply(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return st.s.idempotent(w, r, "POST /api/recovery/apply", body, func(req, rh string) (any, error) {
		p := recovery.Recover(st.j, recovery.PlanOptions{UnderDaemon: true, LiveAfter: st.j.StartSeq()})
		opts := recovery.ApplyOptions{Req: req, ReqHash: rh, Snapshot: func(p *recovery.Plan) (json.RawMessage, error) { return json.Marshal(p) }}
		if _, err := recovery.Apply(r.Context(), st.j, p, opts); err != nil {
			return nil, mapError(onSteps, err)
		}
		return p, nil
	})
}

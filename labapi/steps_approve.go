package labapi

import (
	"net/http"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/steps"
)

// POST /api/steps/{mandateId}/approve {step_id, note?} → {mandateId, stepId, status}
//
// The operator's "the side effect happened, as planned" (recovery.Approve):
// the daemon takes the step's world hash now and records step.completed
// (recovered) with it; the caller sends no hash. Like every transition it
// takes a request id.
func (s *Server) registerStepApprove() {
	const route = "POST /api/steps/{mandateId}/approve"
	s.route(route, authAlways, func(w http.ResponseWriter, r *http.Request) error {
		mid := r.PathValue("mandateId")
		body, err := readBody(r)
		if err != nil {
			return err
		}
		return s.idempotent(w, r, strings.Replace(route, "{mandateId}", mid, 1), body, func(req, rh string) (any, error) {
			if err := home.ValidateID(mid); err != nil {
				return nil, NewError(CodeInvalidArgument, "mandateId: "+err.Error(), "Use 1–128 characters of [A-Za-z0-9_.-].")
			}
			var in struct {
				StepID string `json:"step_id"`
				Note   string `json:"note"`
			}
			if err := decodeJSON(body, &in); err != nil {
				return nil, err
			}
			if err := home.ValidateID(in.StepID); err != nil {
				return nil, NewError(CodeInvalidArgument, "step_id: "+err.Error(), "Name the step to approve: {\"step_id\": \"…\"}.").With("field", "step_id")
			}
			resp, err := recovery.Approve(r.Context(), s.opts.Journal, mid, in.StepID,
				recovery.ApproveOptions{Note: steps.CutErrorMsg(in.Note), Req: req, ReqHash: rh})
			if err != nil {
				return nil, mapError(onApprove|onSteps, err)
			}
			return resp, nil
		})
	})
}

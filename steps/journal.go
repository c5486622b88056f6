package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
)

// Errors of step transitions.
var (
	// ErrUnknownMandate: a transition names a mandate that was never planned.
	ErrUnknownMandate = errors.New("unknown mandate")
	// ErrUnknownStep: a transition names a step its mandate's plan lacks.
	ErrUnknownStep = errors.New("unknown step")
	// ErrInvalidTransition: the step's status does not allow the transition.
	ErrInvalidTransition = errors.New("invalid step transition")
	// ErrInvalidStep: a transition's fields are missing or malformed.
	ErrInvalidStep = errors.New("invalid step transition fields")
	// ErrMandateCancelled: the mandate was cancelled (mandate.cancelled);
	// none of its steps starts executing again. It wraps
	// ErrInvalidTransition.
	ErrMandateCancelled = fmt.Errorf("%w: mandate cancelled", ErrInvalidTransition)
	// ErrStale: the step moved since the caller looked at it (RecordAt);
	// nothing was appended. It wraps ErrInvalidTransition.
	ErrStale = fmt.Errorf("%w: step moved since it was classified", ErrInvalidTransition)
)

// MaxErrorMsg is the longest error_msg a step.failed keeps (characters).
const MaxErrorMsg = 500

// Recorder is where a Runner records step transitions and reads back what
// is recorded: the engine directly (Journal), or a running daemon's steps
// API (the CLI's client), so that one process stays the single writer.
type Recorder interface {
	// Record validates and appends one step transition.
	Record(ctx context.Context, p events.Payload) error
	// Mandate returns the mandate's recorded state, nil when unknown.
	Mandate(ctx context.Context, id string) (*MandateState, error)
}

// CutErrorMsg cuts msg to MaxErrorMsg characters (valid UTF-8 kept).
func CutErrorMsg(msg string) string {
	if utf8.RuneCountInString(msg) <= MaxErrorMsg {
		return msg
	}
	n := 0
	for i := range msg {
		if n == MaxErrorMsg {
			return msg[:i]
		}
		n++
	}
	return msg
}

func badField(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidStep, fmt.Sprintf(format, args...))
}

func checkHash(field, h string, required bool) error {
	if h == "" {
		if required {
			return badField("%s is required", field)
		}
		return nil
	}
	if !ValidHash(h) {
		return badField("%s %q is not sha256- and 64 lowercase hex digits", field, h)
	}
	return nil
}

// Normalize fills what a transition may leave out (the plan's idem_key,
// derived idem keys of a plan) and cuts error_msg to 500 characters.
func Normalize(m *MandateState, p events.Payload) {
	switch p := p.(type) {
	case *events.StepPlanned:
		for i := range p.Steps {
			if p.Steps[i].IdemKey == "" {
				p.Steps[i].IdemKey = IdemKey(p.MandateID, p.Steps[i].StepID, p.Steps[i].ParamsHash)
			}
		}
	case *events.StepExecuting:
		fillIdemKey(m, p.StepID, &p.IdemKey)
	case *events.StepReset:
		fillIdemKey(m, p.StepID, &p.IdemKey)
	case *events.StepFailed:
		p.ErrorMsg = CutErrorMsg(p.ErrorMsg)
	}
}

// fillIdemKey sets an empty *key to the plan's idem_key of step (m may be nil).
func fillIdemKey(m *MandateState, step string, key *string) {
	if m == nil || *key != "" {
		return
	}
	if s := m.Step(step); s != nil {
		*key = s.IdemKey
	}
}

// StepTarget returns the mandate and step a payload is about.
func StepTarget(p events.Payload) (mandateID, stepID string) {
	switch p := p.(type) {
	case *events.StepPlanned:
		return p.MandateID, ""
	case *events.StepExecuting:
		return p.MandateID, p.StepID
	case *events.StepCompleted:
		return p.MandateID, p.StepID
	case *events.StepFailed:
		return p.MandateID, p.StepID
	case *events.StepNeedsReview:
		return p.MandateID, p.StepID
	case *events.StepReset:
		return p.MandateID, p.StepID
	case *events.MandateCancelled:
		return p.MandateID, ""
	}
	return "", ""
}

// NextStatus is the status a transition moves its step to.
func NextStatus(p events.Payload) string {
	switch p.(type) {
	case *events.StepPlanned, *events.StepReset:
		return events.StatusPending
	case *events.StepExecuting:
		return events.StatusExecuting
	case *events.StepCompleted:
		return events.StatusCompleted
	case *events.StepFailed:
		return events.StatusFailed
	case *events.StepNeedsReview:
		return events.StatusNeedsReview
	case *events.MandateCancelled:
		return MandateCancelled
	}
	return ""
}

// CheckTransition validates p against m, the mandate's current state (nil
// when unknown). Allowed moves:
//
//	plan        only for a mandate not planned yet
//	executing   pending | failed               → executing (needs observed_pre_hash)
//	completed   executing | needs_review       → completed (needs post_hash, result_hash);
//	            with recovered: any status but completed
//	failed      pending | executing | needs_review → failed (needs error_class)
//	review      any status but completed       → needs_review (needs reason)
//	reset       executing | failed | needs_review → pending
//	cancel      a planned mandate not cancelled yet (mandate.cancelled)
//
// A cancelled mandate takes no executing: what runs may still complete,
// fail, be reviewed or reset, nothing starts again.
func CheckTransition(m *MandateState, p events.Payload) error {
	mid, sid := StepTarget(p)
	if err := home.ValidateID(mid); err != nil {
		return badField("mandate id: %v", err)
	}
	if m != nil && m.MandateID != mid {
		m = nil // state of another mandate: this one is unknown
	}
	if pl, ok := p.(*events.StepPlanned); ok {
		if m != nil && !m.Orphan {
			return fmt.Errorf("%w: mandate %s is already planned (seq %d)", ErrInvalidTransition, mid, m.PlannedSeq)
		}
		if len(pl.Steps) == 0 {
			return badField("a plan needs at least one step")
		}
		if len(pl.Steps) > MaxMandateSteps {
			return badField("a plan has at most %d steps", MaxMandateSteps)
		}
		seen := map[string]bool{}
		for _, s := range pl.Steps {
			if err := home.ValidateID(s.StepID); err != nil {
				return badField("step_id: %v", err)
			}
			if seen[s.StepID] {
				return badField("step_id %q appears twice", s.StepID)
			}
			seen[s.StepID] = true
			if s.Tool == "" {
				return badField("step %s: tool is required", s.StepID)
			}
			if err := checkHash("params_hash of "+s.StepID, s.ParamsHash, true); err != nil {
				return err
			}
			if err := checkHash("pre_hash of "+s.StepID, s.PreHash, false); err != nil {
				return err
			}
			if err := checkHash("expected_post_hash of "+s.StepID, s.ExpectedPostHash, false); err != nil {
				return err
			}
			if s.IdemKey == "" {
				return badField("step %s: idem_key is required", s.StepID)
			}
			if s.Dir != "" && !filepath.IsAbs(s.Dir) {
				return badField("step %s: dir %q must be absolute (world paths resolve against it)", s.StepID, s.Dir)
			}
			for _, w := range s.World {
				if w == "" || strings.ContainsRune(w, 0) {
					return badField("step %s: world paths must be non-empty and without NUL bytes", s.StepID)
				}
			}
		}
		return nil
	}
	if _, ok := p.(*events.MandateCancelled); ok {
		switch {
		case m == nil || m.Orphan:
			return fmt.Errorf("%w: %s (nothing to cancel)", ErrUnknownMandate, mid)
		case m.Cancelled:
			return fmt.Errorf("%w: %s is already cancelled", ErrInvalidTransition, mid)
		case m.Status == MandateCompleted:
			return fmt.Errorf("%w: %s is completed; there is nothing left to cancel", ErrInvalidTransition, mid)
		}
		return nil
	}
	if err := home.ValidateID(sid); err != nil {
		return badField("step_id: %v", err)
	}
	if m == nil || m.Orphan {
		return fmt.Errorf("%w: %s (plan it first)", ErrUnknownMandate, mid)
	}
	s := m.Step(sid)
	if s == nil || s.Orphan {
		return fmt.Errorf("%w: %s has no step %s", ErrUnknownStep, mid, sid)
	}
	from := s.Status
	refuse := func(what string) error {
		return fmt.Errorf("%w: step %s/%s is %s; %s", ErrInvalidTransition, mid, sid, from, what)
	}
	switch p := p.(type) {
	case *events.StepExecuting:
		if m.Cancelled {
			return fmt.Errorf("%w: %s (%s); no step of it starts again: use a new mandate id", ErrMandateCancelled, mid, orDash(m.CancelReason))
		}
		if from != events.StatusPending && from != events.StatusFailed {
			return refuse("only a pending or failed step can start executing")
		}
		if err := checkHash("observed_pre_hash", p.ObservedPreHash, true); err != nil {
			return err
		}
		if p.IdemKey != "" && p.IdemKey != s.IdemKey {
			return badField("idem_key %q is not the plan's %q", p.IdemKey, s.IdemKey)
		}
	case *events.StepCompleted:
		if from == events.StatusCompleted {
			return refuse("a completed step is never completed again")
		}
		if !p.Recovered && from != events.StatusExecuting && from != events.StatusNeedsReview {
			return refuse("only an executing step (or one in review) can complete")
		}
		if err := checkHash("post_hash", p.PostHash, true); err != nil {
			return err
		}
		if err := checkHash("result_hash", p.ResultHash, !p.Recovered); err != nil {
			return err
		}
		if err := checkHash("output_digest", p.OutputDigest, false); err != nil {
			return err
		}
	case *events.StepFailed:
		if from != events.StatusPending && from != events.StatusExecuting && from != events.StatusNeedsReview {
			return refuse("only a pending, executing or in-review step can fail")
		}
		if p.ErrorClass == "" {
			return badField("error_class is required")
		}
	case *events.StepNeedsReview:
		if from == events.StatusCompleted {
			return refuse("a completed step cannot be put in review")
		}
		if p.Reason == "" {
			return badField("reason is required")
		}
	case *events.StepReset:
		if from != events.StatusExecuting && from != events.StatusFailed && from != events.StatusNeedsReview {
			return refuse("only an executing, failed or in-review step can be reset to pending")
		}
		if p.IdemKey != "" && p.IdemKey != s.IdemKey {
			return badField("idem_key %q is not the plan's %q (a reset keeps it)", p.IdemKey, s.IdemKey)
		}
	default:
		return badField("%T is not a step transition", p)
	}
	return nil
}

// TransitionResponse is the JSON answer to a recorded transition.
type TransitionResponse struct {
	MandateID string `json:"mandateId"`
	StepID    string `json:"stepId,omitempty"`
	Status    string `json:"status"`
	IdemKey   string `json:"idemKey,omitempty"`
}

// Journal records step transitions on an engine: it validates each against
// the state rebuilt from the log and appends it, one at a time, so checks
// and appends cannot interleave. Inside a daemon it is the single writer of
// step events (the steps API and recovery share one).
type Journal struct {
	eng   *engine.Engine
	state *State
	mu    sync.Mutex
	// startSeq is the log's last seq when the journal was created: step
	// transitions after it belong to this process's lifetime.
	startSeq uint64
	// refused: why the snapshot was not trusted (SnapshotRefused).
	refused string
	snapMu  sync.Mutex
	snapErr error
	snap    *snapshot.Writer // nil when read-only
}

// NewJournal subscribes a step state to eng: the state's snapshot
// (state/snapshots/steps.msgpack) if it can be trusted, then the log after
// its seq (the whole log without one). Unless eng is read-only, the
// snapshot is written at eng's checkpoints.
func NewJournal(eng *engine.Engine) (*Journal, error) {
	j := &Journal{eng: eng}
	j.startSeq = eng.Log().LastSeq()
	st, w, refused, err := snapshot.Attach(eng, SnapshotKind, SnapshotFile(eng.Home()), NewState,
		func(st *State) error { return eng.Subscribe(st) }, j.snapshotWritten)
	if err != nil {
		return nil, fmt.Errorf("recovery: rebuilding step state: %w", err)
	}
	j.state, j.snap, j.refused = st, w, refused
	return j, nil
}

// SnapshotRefused says why the step state's snapshot was ignored and the
// state rebuilt from the log ("" when it was trusted or missing): the
// daemon logs it.
func (j *Journal) SnapshotRefused() string { return j.refused }

// SnapshotErr is the error of the last snapshot write, nil once one
// succeeds (or skips) again.
func (j *Journal) SnapshotErr() error {
	j.snapMu.Lock()
	defer j.snapMu.Unlock()
	return j.snapErr
}

// State is the journal's live step state.
func (j *Journal) State() *State { return j.state }

// StartSeq is the last seq of the log when the journal was created.
func (j *Journal) StartSeq() uint64 { return j.startSeq }

// Engine is the journal's engine.
func (j *Journal) Engine() *engine.Engine { return j.eng }

// Mandate implements Recorder.
func (j *Journal) Mandate(ctx context.Context, id string) (*MandateState, error) {
	return j.state.Mandate(id), nil
}

// Record implements Recorder.
func (j *Journal) Record(ctx context.Context, p events.Payload) error {
	_, err := j.RecordRequest(ctx, p, "", "")
	return err
}

// RecordRequest normalizes, validates and appends p. When req is set the
// one appended event carries req, reqHash and the response snapshot, so a
// retried request is answered from the log.
func (j *Journal) RecordRequest(ctx context.Context, p events.Payload, req, reqHash string) (TransitionResponse, error) {
	return j.record(ctx, p, req, reqHash, 0)
}

// RecordAt records p only if its step's last transition is still at seq
// (StepState.LastSeq when the caller decided on p): a decision taken on a
// state that has moved since is refused with ErrStale, and nothing is
// appended. Recovery applies its decisions this way.
func (j *Journal) RecordAt(ctx context.Context, p events.Payload, seq uint64) error {
	if seq == 0 {
		return fmt.Errorf("%w: RecordAt needs the step's last seq", ErrInvalidStep)
	}
	_, err := j.record(ctx, p, "", "", seq)
	return err
}

// RecordRequestAt is RecordAt for an HTTP caller: the event carries req,
// reqHash and the response snapshot, as RecordRequest's does (an
// operator's decision taken on a step's state, such as recovery.Approve).
func (j *Journal) RecordRequestAt(ctx context.Context, p events.Payload, seq uint64, req, reqHash string) (TransitionResponse, error) {
	if seq == 0 {
		return TransitionResponse{}, fmt.Errorf("%w: RecordRequestAt needs the step's last seq", ErrInvalidStep)
	}
	return j.record(ctx, p, req, reqHash, seq)
}

func (j *Journal) record(ctx context.Context, p events.Payload, req, reqHash string, at uint64) (TransitionResponse, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	mid, sid := StepTarget(p)
	m := j.state.Mandate(mid)
	if at != 0 {
		var s *StepState
		if m != nil {
			s = m.Step(sid)
		}
		if s == nil || s.LastSeq != at {
			last := uint64(0)
			if s != nil {
				last = s.LastSeq
			}
			return TransitionResponse{}, fmt.Errorf("%w: %s/%s was at seq %d, is at %d", ErrStale, mid, sid, at, last)
		}
	}
	Normalize(m, p)
	if err := CheckTransition(m, p); err != nil {
		return TransitionResponse{}, err
	}
	resp := TransitionResponse{MandateID: mid, StepID: sid, Status: NextStatus(p)}
	switch p := p.(type) {
	case *events.StepExecuting:
		resp.IdemKey = p.IdemKey
	case *events.StepReset:
		resp.IdemKey = p.IdemKey
	case *events.StepPlanned:
		resp.Status = "planned"
	}
	if _, ok := p.(*events.MandateCancelled); ok {
		resp.Status = MandateCancelled
	}
	ev, err := events.New(mid, p)
	if err != nil {
		return TransitionResponse{}, err
	}
	if req != "" {
		b, err := json.Marshal(resp)
		if err != nil {
			return TransitionResponse{}, err
		}
		ev.WithRequest(req, reqHash, b)
	}
	if _, err := j.eng.Append(ctx, ev); err != nil {
		return TransitionResponse{}, err
	}
	return resp, nil
}

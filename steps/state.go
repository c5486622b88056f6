package steps

import (
	"bytes"
	"slices"
	"sync"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/snapshot"
)

// StepState is one step rebuilt from its transitions. Fields are set by the
// transitions that carry them and never cleared: an observed_pre_hash
// survives a reset, a post_hash survives a later review.
type StepState struct {
	MandateID        string   `json:"mandate_id"`
	StepID           string   `json:"step_id"`
	Index            int      `json:"index"`
	Tool             string   `json:"tool,omitempty"`
	ParamsHash       string   `json:"params_hash,omitempty"`
	PreHash          string   `json:"pre_hash,omitempty"`
	ExpectedPostHash string   `json:"expected_post_hash,omitempty"`
	IdemKey          string   `json:"idem_key,omitempty"`
	World            []string `json:"world,omitempty"`
	Dir              string   `json:"dir,omitempty"`

	Status          string `json:"status"`
	ObservedPreHash string `json:"observed_pre_hash,omitempty"`
	PostHash        string `json:"post_hash,omitempty"`
	ResultHash      string `json:"result_hash,omitempty"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	OutputDigest    string `json:"output_digest,omitempty"`
	Recovered       bool   `json:"recovered,omitempty"`
	ErrorClass      string `json:"error_class,omitempty"`
	ErrorMsg        string `json:"error_msg,omitempty"`
	Reason          string `json:"reason,omitempty"`
	// Pid, PidStart and BootID name the process of the last executing
	// transition that recorded one (events.StepExecuting).
	Pid      int    `json:"pid,omitempty"`
	PidStart uint64 `json:"pid_start,omitempty"`
	BootID   string `json:"boot_id,omitempty"`
	// RunnerPid and RunnerStart name the runner of that transition.
	RunnerPid   int    `json:"runner_pid,omitempty"`
	RunnerStart uint64 `json:"runner_start,omitempty"`

	Evidence *events.Evidence `json:"evidence,omitempty"`
	// Orphan marks a step whose transitions arrived without a plan naming it.
	Orphan bool `json:"orphan,omitempty"`
	// Transitions counts the events applied to this step.
	Transitions int    `json:"transitions"`
	LastSeq     uint64 `json:"last_seq"`
	LastTS      int64  `json:"last_ts"`
}

// Mandate statuses derived from the steps.
const (
	MandateOpen      = "open"      // some step not completed, none failed or in review
	MandateCompleted = "completed" // every step completed
	MandateFailed    = "failed"    // a step failed
	MandatePaused    = "paused"    // a step awaits review
	MandateCancelled = "cancelled" // mandate.cancelled recorded (whatever its steps)
)

// MandateState is one mandate: its plan and its steps in plan order.
type MandateState struct {
	MandateID string `json:"mandate_id"`
	Name      string `json:"name,omitempty"`
	Status    string `json:"status"`
	// Orphan marks a mandate known only from transitions, never planned.
	Orphan     bool         `json:"orphan,omitempty"`
	PlannedSeq uint64       `json:"planned_seq,omitempty"`
	LastSeq    uint64       `json:"last_seq"`
	LastTS     int64        `json:"last_ts"`
	Steps      []*StepState `json:"steps"`
	// Spec is the mandate file as planned by `cmlab run` (nil otherwise).
	Spec []byte `json:"-"`
	// LastAuto is the last automatic recovery decision about the mandate.
	LastAuto *events.RecoveryDecision `json:"last_auto,omitempty"`
	// Cancelled is set by mandate.cancelled; CancelReason is its reason.
	Cancelled    bool   `json:"cancelled,omitempty"`
	CancelReason string `json:"cancel_reason,omitempty"`
}

// Step returns the step with id, or nil.
func (m *MandateState) Step(id string) *StepState {
	for _, s := range m.Steps {
		if s.StepID == id {
			return s
		}
	}
	return nil
}

func (m *MandateState) derive() {
	if m.Cancelled {
		m.Status = MandateCancelled
		return
	}
	st := MandateCompleted
	for _, s := range m.Steps {
		switch s.Status {
		case events.StatusNeedsReview:
			st = MandatePaused
		case events.StatusFailed:
			if st != MandatePaused {
				st = MandateFailed
			}
		case events.StatusCompleted:
		default:
			if st == MandateCompleted {
				st = MandateOpen
			}
		}
	}
	if len(m.Steps) == 0 {
		st = MandateOpen
	}
	m.Status = st
}

func (m *MandateState) clone() *MandateState {
	c := *m
	c.Spec = bytes.Clone(m.Spec)
	c.Steps = make([]*StepState, len(m.Steps))
	for i, s := range m.Steps {
		sc := *s
		sc.World = slices.Clone(s.World)
		setCopy(&sc.ExitCode, s.ExitCode)
		setCopy(&sc.Evidence, s.Evidence)
		c.Steps[i] = &sc
	}
	setCopy(&c.LastAuto, m.LastAuto)
	return &c
}

// State is every mandate rebuilt from the log. It is an engine observer
// (feed it events in log order) and safe for concurrent use; readers get
// copies.
type State struct {
	mu       sync.RWMutex
	mandates map[string]*MandateState
	order    []string
	lastSeq  uint64
	// errs counts step events whose payload did not decode.
	errs int
	// covered and coveredID are the last event observed, of any type (or
	// the one a loaded snapshot covers); loaded is that snapshot's seq,
	// written the last snapshot written or loaded (snapshot.go).
	covered   uint64
	coveredID string
	loaded    uint64
	written   snapshot.Written
}

// NewState returns an empty state.
func NewState() *State { return &State{mandates: map[string]*MandateState{}} }

// Rebuild folds evs (in log order) into a new state.
func Rebuild(evs []*events.Event) *State {
	s := NewState()
	for _, ev := range evs {
		s.Observe(ev)
	}
	return s
}

// Observe applies one event; events that are not step or recovery events
// are ignored.
func (s *State) Observe(ev *events.Event) {
	var p events.Payload
	var err error
	step := false
	switch ev.Type {
	case events.TypeStepPlanned, events.TypeStepExecuting, events.TypeStepCompleted,
		events.TypeStepFailed, events.TypeStepNeedsReview, events.TypeStepReset,
		events.TypeMandateCancelled, events.TypeRecoveryApplied:
		step = true
		p, err = ev.Decode()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Seq != 0 {
		if ev.Seq <= s.loaded {
			return // covered by the loaded snapshot
		}
		if ev.Seq > s.covered {
			s.covered, s.coveredID = ev.Seq, ev.ID
		}
	}
	if !step {
		return
	}
	if ev.Seq > s.lastSeq {
		s.lastSeq = ev.Seq
	}
	if err != nil {
		s.errs++
		return
	}
	s.apply(ev, p)
}

// LastSeq is the last step or recovery event seen.
func (s *State) LastSeq() uint64 { s.mu.RLock(); defer s.mu.RUnlock(); return s.lastSeq }

// Mandate returns a copy of mandate id, or nil.
func (s *State) Mandate(id string) *MandateState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.mandates[id]
	if !ok {
		return nil
	}
	return m.clone()
}

// Mandates returns copies of every mandate in the order they first appeared.
func (s *State) Mandates() []*MandateState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*MandateState, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.mandates[id].clone())
	}
	return out
}

func (s *State) mandate(id string, orphan bool) *MandateState {
	m, ok := s.mandates[id]
	if !ok {
		m = &MandateState{MandateID: id, Orphan: orphan, Status: MandateOpen}
		s.mandates[id] = m
		s.order = append(s.order, id)
	}
	return m
}

// transition finds or creates (as an orphan) the step a transition of ev
// names (its mandate: mandateOf) and sets the status it moves to.
func (s *State) transition(ev *events.Event, mandateID, stepID, status string) (*MandateState, *StepState) {
	mandateID = mandateOf(ev, mandateID)
	m := s.mandate(mandateID, true)
	st := m.Step(stepID)
	if st == nil {
		st = &StepState{MandateID: mandateID, StepID: stepID, Index: len(m.Steps), Status: events.StatusPending, Orphan: true}
		m.Steps = append(m.Steps, st)
	}
	st.Status = status
	return m, st
}

func set(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// setCopy points *dst at a copy of *v when v is set, so the state never
// shares a pointer with a payload or a reader's copy.
func setCopy[T any](dst **T, v *T) {
	if v != nil {
		c := *v
		*dst = &c
	}
}

func mandateOf(ev *events.Event, id string) string {
	if id != "" {
		return id
	}
	return ev.Stream
}

func (s *State) apply(ev *events.Event, p events.Payload) {
	var m *MandateState
	var st *StepState
	switch p := p.(type) {
	case *events.StepPlanned:
		m = s.mandate(mandateOf(ev, p.MandateID), false)
		m.Orphan = false
		set(&m.Name, p.Name)
		if len(p.Spec) > 0 {
			m.Spec = bytes.Clone(p.Spec)
		}
		if m.PlannedSeq == 0 {
			m.PlannedSeq = ev.Seq
		}
		for _, ps := range p.Steps {
			x := m.Step(ps.StepID)
			if x == nil {
				x = &StepState{MandateID: m.MandateID, StepID: ps.StepID, Index: len(m.Steps), Status: events.StatusPending}
				m.Steps = append(m.Steps, x)
			}
			x.Orphan = false
			set(&x.Tool, ps.Tool)
			set(&x.ParamsHash, ps.ParamsHash)
			set(&x.PreHash, ps.PreHash)
			set(&x.ExpectedPostHash, ps.ExpectedPostHash)
			set(&x.IdemKey, ps.IdemKey)
			set(&x.Dir, ps.Dir)
			if len(ps.World) > 0 {
				x.World = slices.Clone(ps.World)
			}
			x.Transitions++
			x.LastSeq, x.LastTS = ev.Seq, ev.TS
		}
	case *events.StepExecuting:
		m, st = s.transition(ev, p.MandateID, p.StepID, events.StatusExecuting)
		set(&st.IdemKey, p.IdemKey)
		set(&st.ObservedPreHash, p.ObservedPreHash)
		if p.Pid > 0 {
			st.Pid, st.PidStart, st.BootID = p.Pid, p.PidStart, p.BootID
			st.RunnerPid, st.RunnerStart = p.RunnerPid, p.RunnerStart
		}
	case *events.StepCompleted:
		m, st = s.transition(ev, p.MandateID, p.StepID, events.StatusCompleted)
		set(&st.PostHash, p.PostHash)
		set(&st.ResultHash, p.ResultHash)
		set(&st.OutputDigest, p.OutputDigest)
		setCopy(&st.ExitCode, p.ExitCode)
		if p.Recovered {
			st.Recovered = true
		}
		setCopy(&st.Evidence, p.Evidence)
	case *events.StepFailed:
		m, st = s.transition(ev, p.MandateID, p.StepID, events.StatusFailed)
		set(&st.ErrorClass, p.ErrorClass)
		set(&st.ErrorMsg, p.ErrorMsg)
		setCopy(&st.ExitCode, p.ExitCode)
	case *events.StepNeedsReview:
		m, st = s.transition(ev, p.MandateID, p.StepID, events.StatusNeedsReview)
		set(&st.Reason, p.Reason)
		setCopy(&st.Evidence, p.Evidence)
	case *events.StepReset:
		m, st = s.transition(ev, p.MandateID, p.StepID, events.StatusPending)
		set(&st.IdemKey, p.IdemKey)
		set(&st.Reason, p.Reason)
	case *events.MandateCancelled:
		m = s.mandate(mandateOf(ev, p.MandateID), true)
		m.Cancelled = true
		set(&m.CancelReason, p.Reason)
	case *events.RecoveryApplied:
		if !p.Auto {
			return
		}
		for i := range p.Decisions {
			d := p.Decisions[i]
			if d.StepID != "" || d.MandateID == "" {
				continue
			}
			if mm, ok := s.mandates[d.MandateID]; ok {
				mm.LastAuto = &d
			}
		}
		return
	}
	if st != nil {
		st.Transitions++
		st.LastSeq, st.LastTS = ev.Seq, ev.TS
	}
	m.LastSeq, m.LastTS = ev.Seq, ev.TS
	m.derive()
}

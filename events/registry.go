package events

import (
	"fmt"
	"sort"
)

// Upcaster rewrites a payload, decoded as a generic map, from version N to
// N+1. It must be deterministic.
type Upcaster func(old map[string]any) (map[string]any, error)

// TypeInfo describes one registered event type.
type TypeInfo struct {
	Type    string
	Version int
	New     func() Payload
	// Upcasters[n] turns a version n payload into version n+1.
	Upcasters map[int]Upcaster
}

// The registry is filled once, from the catalogue below, and
// read-only afterwards.
var registry = map[string]*TypeInfo{}

func register(p func() Payload, version int, ups map[int]Upcaster) {
	t := p().EventType()
	if _, dup := registry[t]; dup {
		panic("events: duplicate registration of " + t)
	}
	registry[t] = &TypeInfo{Type: t, Version: version, New: p, Upcasters: ups}
}

func lookup(t string) (*TypeInfo, bool) {
	info, ok := registry[t]
	return info, ok
}

// Lookup returns the registration of type t.
func Lookup(t string) (TypeInfo, bool) {
	info, ok := registry[t]
	if !ok {
		return TypeInfo{}, false
	}
	return *info, true
}

// Types lists every registered type, sorted.
func Types() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func upcast(info *TypeInfo, from int, raw []byte) ([]byte, error) {
	var m map[string]any
	if err := Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for v := from; v < info.Version; v++ {
		up, ok := info.Upcasters[v]
		if !ok {
			return nil, fmt.Errorf("no upcaster from v%d", v)
		}
		var err error
		if m, err = up(m); err != nil {
			return nil, fmt.Errorf("v%d→v%d: %w", v, v+1, err)
		}
	}
	return Marshal(m)
}

// The catalogue of the log's event types: each payload's type name and
// its registration at schema version 1 (a payload whose fields change gets
// its next version and upcasters here). The types and their names are
// declared beside their payloads (lab.go, steps.go, pty.go, system.go,
// adopt.go).

func (LabSessionStarted) EventType() string   { return TypeLabSessionStarted }
func (FeedbackSubmitted) EventType() string   { return TypeFeedbackSubmitted }
func (FeedbackIngested) EventType() string    { return TypeFeedbackIngested }
func (RunImported) EventType() string         { return TypeRunImported }
func (ExperimentCreated) EventType() string   { return TypeExperimentCreated }
func (ExperimentSubmitted) EventType() string { return TypeExperimentSubmitted }
func (ExperimentUpdated) EventType() string   { return TypeExperimentUpdated }
func (IdempotencyRecorded) EventType() string { return TypeIdempotencyRecorded }

func (MandateCancelled) EventType() string { return TypeMandateCancelled }
func (StepPlanned) EventType() string      { return TypeStepPlanned }
func (StepExecuting) EventType() string    { return TypeStepExecuting }
func (StepCompleted) EventType() string    { return TypeStepCompleted }
func (StepFailed) EventType() string       { return TypeStepFailed }
func (StepNeedsReview) EventType() string  { return TypeStepNeedsReview }
func (StepReset) EventType() string        { return TypeStepReset }

func (PtySessionStarted) EventType() string { return TypePtySessionStarted }
func (PtyBlockBegin) EventType() string     { return TypePtyBlockBegin }
func (PtyOutput) EventType() string         { return TypePtyOutput }
func (PtyBlockEnd) EventType() string       { return TypePtyBlockEnd }
func (PtyPrompt) EventType() string         { return TypePtyPrompt }
func (PtyInput) EventType() string          { return TypePtyInput }
func (PtySessionReset) EventType() string   { return TypePtySessionReset }
func (PtySessionEnded) EventType() string   { return TypePtySessionEnded }
func (PtyTruncated) EventType() string      { return TypePtyTruncated }

func (WalRepaired) EventType() string     { return TypeWalRepaired }
func (WalSalvaged) EventType() string     { return TypeWalSalvaged }
func (RecoveryApplied) EventType() string { return TypeRecoveryApplied }

func (RunAdopted) EventType() string        { return TypeRunAdopted }
func (ExperimentAdopted) EventType() string { return TypeExperimentAdopted }
func (SessionAdopted) EventType() string    { return TypeSessionAdopted }

func init() {
	for _, p := range []func() Payload{
		payload[LabSessionStarted], payload[FeedbackSubmitted], payload[FeedbackIngested], payload[RunImported],
		payload[ExperimentCreated], payload[ExperimentSubmitted], payload[ExperimentUpdated],
		payload[IdempotencyRecorded],
		payload[MandateCancelled], payload[StepPlanned], payload[StepExecuting], payload[StepCompleted],
		payload[StepFailed], payload[StepNeedsReview], payload[StepReset],
		payload[PtySessionStarted], payload[PtyBlockBegin], payload[PtyOutput], payload[PtyBlockEnd],
		payload[PtyPrompt], payload[PtyInput], payload[PtySessionReset], payload[PtySessionEnded],
		payload[PtyTruncated],
		payload[WalRepaired], payload[WalSalvaged], payload[RecoveryApplied],
		payload[RunAdopted], payload[ExperimentAdopted], payload[SessionAdopted],
	} {
		register(p, 1, nil)
	}
}

// payload is the constructor of an empty *T.
func payload[T any, P interface {
	*T
	Payload
}]() Payload {
	return P(new(T))
}

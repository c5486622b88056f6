package labapi

import (
	"sort"
	"sync"

	"github.com/cmlab/cmlab/events"
)

// labState is the in-memory read model of runs, experiments and sessions.
// It is an engine observer: rebuilt from the whole log when the server is
// built, then fed each event after it is durable. Timestamps a producer
// left empty are filled from the event's ts exactly as the projector does,
// so the API and the JSONL views agree.
type labState struct {
	mu       sync.RWMutex
	runs     map[string]*events.LabRun
	runOrder []string
	byReal   map[string]string // artifactsDirRealpath → newest runId
	exps     map[string]*events.LabExperiment
	expOrder []string
	sessions map[string]int64 // sessionId → started ts (ms)

	seq     uint64 // last event observed (or covered by the loaded snapshot)
	eventID string // its id
	snapSeq uint64 // seq of the last snapshot written or loaded
}

func newLabState() *labState {
	return &labState{runs: map[string]*events.LabRun{}, byReal: map[string]string{},
		exps: map[string]*events.LabExperiment{}, sessions: map[string]int64{}}
}

// Observe implements engine.Observer.
func (st *labState) Observe(ev *events.Event) {
	st.mu.Lock()
	if ev.Seq != 0 && ev.Seq <= st.seq {
		st.mu.Unlock()
		return // covered by the snapshot
	}
	if ev.Seq != 0 {
		st.seq, st.eventID = ev.Seq, ev.ID
	}
	st.mu.Unlock()
	switch ev.Type {
	case events.TypeRunImported, events.TypeExperimentCreated, events.TypeExperimentSubmitted,
		events.TypeExperimentUpdated, events.TypeLabSessionStarted,
		events.TypeRunAdopted, events.TypeExperimentAdopted:
	default:
		return
	}
	p, err := ev.Decode()
	if err != nil {
		return // verify reports it; the read model skips what it cannot read
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch p := p.(type) {
	case *events.RunImported:
		st.putRun(p.Run, ev)
	case *events.RunAdopted:
		// A content-machine home's line (engine/adopt.go): as they wrote it.
		if run, err := events.ParseRun(p.Raw); err == nil {
			st.putRun(run, ev)
		}
	case *events.ExperimentAdopted:
		if x, err := events.ParseExperiment(p.Raw); err == nil {
			st.putExp(x, ev, false)
		}
	case *events.ExperimentCreated:
		st.putExp(p.Experiment, ev, false)
	case *events.ExperimentSubmitted:
		st.putExp(p.Experiment, ev, true)
	case *events.ExperimentUpdated:
		st.putExp(p.Experiment, ev, true)
	case *events.LabSessionStarted:
		st.sessions[p.SessionID] = ev.TS
	}
}

func (st *labState) putRun(run events.LabRun, ev *events.Event) {
	if run.CreatedAt == "" {
		run.CreatedAt = ev.ISOTime()
	}
	if _, ok := st.runs[run.RunID]; !ok {
		st.runOrder = append(st.runOrder, run.RunID)
	}
	st.runs[run.RunID] = &run
	st.byReal[run.ArtifactsDirRealpath] = run.RunID
}

func (st *labState) putExp(exp events.LabExperiment, ev *events.Event, update bool) {
	if exp.CreatedAt == "" {
		exp.CreatedAt = ev.ISOTime()
	}
	if update && exp.UpdatedAt == "" {
		exp.UpdatedAt = ev.ISOTime()
	}
	if _, ok := st.exps[exp.ExperimentID]; !ok {
		st.expOrder = append(st.expOrder, exp.ExperimentID)
	}
	st.exps[exp.ExperimentID] = &exp
}

func (st *labState) run(id string) (events.LabRun, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	r, ok := st.runs[id]
	if !ok {
		return events.LabRun{}, false
	}
	return *r, true
}

func (st *labState) runByRealpath(real string) (events.LabRun, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	id, ok := st.byReal[real]
	if !ok {
		return events.LabRun{}, false
	}
	return *st.runs[id], true
}

// runList is every run, newest first (createdAt descending, then log order).
func (st *labState) runList() []events.LabRun {
	st.mu.RLock()
	out := make([]events.LabRun, 0, len(st.runOrder))
	for i := len(st.runOrder) - 1; i >= 0; i-- {
		out = append(out, *st.runs[st.runOrder[i]])
	}
	st.mu.RUnlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	return out
}

func (st *labState) experiment(id string) (events.LabExperiment, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	e, ok := st.exps[id]
	if !ok {
		return events.LabExperiment{}, false
	}
	return *e, true
}

// experimentList is the last record of every experiment, newest first.
func (st *labState) experimentList() []events.LabExperiment {
	st.mu.RLock()
	out := make([]events.LabExperiment, 0, len(st.expOrder))
	for i := len(st.expOrder) - 1; i >= 0; i-- {
		out = append(out, *st.exps[st.expOrder[i]])
	}
	st.mu.RUnlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	return out
}

// experimentsByFirstAppearance is the last record of every experiment, in
// the order each experiment first appeared in the log.
func (st *labState) experimentsByFirstAppearance() []events.LabExperiment {
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]events.LabExperiment, 0, len(st.expOrder))
	for _, id := range st.expOrder {
		out = append(out, *st.exps[id])
	}
	return out
}

func (st *labState) sessionStarted(id string) (int64, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	ts, ok := st.sessions[id]
	return ts, ok
}

package labapi

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/cmlab/cmlab/events"
)

// The Lab read model as it was before the store (issue 26), kept as the
// reference the store's answers must equal byte for byte.

// refLabState is the in-memory read model of runs, experiments and sessions.
// It is an engine observer: rebuilt from the whole log when the server is
// built, then fed each event after it is durable. Timestamps a producer
// left empty are filled from the event's ts exactly as the projector does,
// so the API and the JSONL views agree.
type refLabState struct {
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

func newRefLabState() *refLabState {
	return &refLabState{runs: map[string]*events.LabRun{}, byReal: map[string]string{},
		exps: map[string]*events.LabExperiment{}, sessions: map[string]int64{}}
}

// Observe implements engine.Observer.
func (st *refLabState) Observe(ev *events.Event) {
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

func (st *refLabState) putRun(run events.LabRun, ev *events.Event) {
	if run.CreatedAt == "" {
		run.CreatedAt = ev.ISOTime()
	}
	if _, ok := st.runs[run.RunID]; !ok {
		st.runOrder = append(st.runOrder, run.RunID)
	}
	st.runs[run.RunID] = &run
	st.byReal[run.ArtifactsDirRealpath] = run.RunID
}

func (st *refLabState) putExp(exp events.LabExperiment, ev *events.Event, update bool) {
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

func (st *refLabState) run(id string) (events.LabRun, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	r, ok := st.runs[id]
	if !ok {
		return events.LabRun{}, false
	}
	return *r, true
}

func (st *refLabState) runByRealpath(real string) (events.LabRun, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	id, ok := st.byReal[real]
	if !ok {
		return events.LabRun{}, false
	}
	return *st.runs[id], true
}

// runList is every run, newest first (createdAt descending, then log order).
func (st *refLabState) runList() []events.LabRun {
	st.mu.RLock()
	out := make([]events.LabRun, 0, len(st.runOrder))
	for i := len(st.runOrder) - 1; i >= 0; i-- {
		out = append(out, *st.runs[st.runOrder[i]])
	}
	st.mu.RUnlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	return out
}

func (st *refLabState) experiment(id string) (events.LabExperiment, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	e, ok := st.exps[id]
	if !ok {
		return events.LabExperiment{}, false
	}
	return *e, true
}

// experimentList is the last record of every experiment, newest first.
func (st *refLabState) experimentList() []events.LabExperiment {
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
func (st *refLabState) experimentsByFirstAppearance() []events.LabExperiment {
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]events.LabExperiment, 0, len(st.expOrder))
	for _, id := range st.expOrder {
		out = append(out, *st.exps[id])
	}
	return out
}

func (st *refLabState) sessionStarted(id string) (int64, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	ts, ok := st.sessions[id]
	return ts, ok
}

// refRunsList is GET /api/runs as it was answered from the heap model.
func refRunsList(st *refLabState) []byte {
	items := []map[string]any{}
	for _, run := range st.runList() {
		items = append(items, runListItem(&run))
	}
	b, _ := json.Marshal(map[string]any{"items": items, "nextCursor": nil})
	return append(b, '\n')
}

// refExperimentsList is GET /api/experiments as it was.
func refExperimentsList(st *refLabState) []byte {
	items := []map[string]any{}
	for _, e := range st.experimentList() {
		items = append(items, experimentListItem(&e))
	}
	b, _ := json.Marshal(map[string]any{"items": items, "nextCursor": nil})
	return append(b, '\n')
}

// refPageAfter cuts items to the page after the item whose id is
// lq.after, as paging.go did; "" for an unknown cursor.
func refPageAfter[T any](items []T, id func(T) string, lq listQuery) ([]T, string, bool) {
	start := 0
	if lq.after != "" {
		start = -1
		for i, it := range items {
			if id(it) == lq.after {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, "", false
		}
	}
	end := min(start+lq.limit, len(items))
	page := items[start:end]
	next := ""
	if end < len(items) && len(page) > 0 {
		next = id(page[len(page)-1])
	}
	return page, next, true
}

// refRunsPage is a page of GET /api/runs as paging.go answered it (nil:
// the cursor names no item).
func refRunsPage(st *refLabState, lq listQuery, counts map[string]int) []byte {
	runs := st.runList()
	kept := runs[:0]
	for _, r := range runs {
		if lq.q != "" && !strings.Contains(strings.ToLower(r.Topic), lq.q) && !strings.Contains(strings.ToLower(r.RunID), lq.q) &&
			!strings.Contains(strings.ToLower(r.ArtifactsDir), lq.q) {
			continue
		}
		if lq.unrated && counts[r.RunID] > 0 {
			continue
		}
		kept = append(kept, r)
	}
	switch lq.sort {
	case "oldest":
		for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
			kept[i], kept[j] = kept[j], kept[i]
		}
	case "topic":
		sort.SliceStable(kept, func(i, j int) bool { return strings.ToLower(kept[i].Topic) < strings.ToLower(kept[j].Topic) })
	case "sync", "caption", "score":
		sort.SliceStable(kept, func(i, j int) bool {
			a, okA := metricOf(kept[i], lq.sort)
			b, okB := metricOf(kept[j], lq.sort)
			if okA != okB {
				return okA
			}
			return a > b
		})
	}
	page, next, ok := refPageAfter(kept, func(r events.LabRun) string { return r.RunID }, lq)
	if !ok {
		return nil
	}
	items := make([]map[string]any, 0, len(page))
	for _, run := range page {
		item := runListItem(&run)
		item["feedbackCount"] = counts[run.RunID]
		items = append(items, item)
	}
	b, _ := json.Marshal(map[string]any{"items": items, "nextCursor": nullable(next), "total": len(kept)})
	return append(b, '\n')
}

// refExperimentsPage is a page of GET /api/experiments as it was.
func refExperimentsPage(st *refLabState, lq listQuery) []byte {
	exps := st.experimentList()
	kept := exps[:0]
	for _, e := range exps {
		if lq.q != "" && !strings.Contains(strings.ToLower(e.Name), lq.q) && !strings.Contains(strings.ToLower(e.ExperimentID), lq.q) &&
			!strings.Contains(strings.ToLower(e.Topic), lq.q) {
			continue
		}
		kept = append(kept, e)
	}
	switch lq.sort {
	case "oldest":
		for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
			kept[i], kept[j] = kept[j], kept[i]
		}
	case "name":
		sort.SliceStable(kept, func(i, j int) bool { return strings.ToLower(kept[i].Name) < strings.ToLower(kept[j].Name) })
	}
	page, next, ok := refPageAfter(kept, func(e events.LabExperiment) string { return e.ExperimentID }, lq)
	if !ok {
		return nil
	}
	items := make([]map[string]any, 0, len(page))
	for _, e := range page {
		item := experimentListItem(&e)
		item["runCount"] = 1 + len(e.Variants)
		items = append(items, item)
	}
	b, _ := json.Marshal(map[string]any{"items": items, "nextCursor": nullable(next), "total": len(kept)})
	return append(b, '\n')
}

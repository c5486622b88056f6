package retention

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"sync"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/steps"
)

// The timestamp index: runs of consecutive seqs, each with its largest
// ts. A run ends after TSBlock seqs, or when an event's ts falls in
// another TSSpan (milliseconds) than the run's first event's: reading one
// run is bounded in events and lies within TSSpan of the times asked
// about, so it stays in the retained log.
const (
	TSBlock = 4096
	TSSpan  = 10 * 60 * 1000
)

// Model is the retention/status read model. It is an engine observer
// (engine.ResumableObserver once loaded from a snapshot) and safe for
// concurrent use.
type Model struct {
	mu      sync.RWMutex
	seq     uint64 // last event observed (or covered by the loaded snapshot)
	eventID string
	written snapshot.Written // the snapshot written or loaded
	st      state
}

// state is what the snapshot stores.
type state struct {
	// Mandates: per mandate (the step state's key: the payload's mandate
	// id, else the stream) its first step event and its steps' statuses.
	Mandates map[string]*mandate `json:"mandates"`
	// Keys: per "mandate/step" as steps/steps.jsonl names it, the order
	// of its first record and its last status.
	Keys map[string]*stepKey `json:"keys"`
	Ord  uint64              `json:"ord"`
	// Blocks: terminal blocks begun and not ended, by block id.
	Blocks map[string]*openBlock `json:"blocks"`
	// Runs is the timestamp index, in seq order.
	Runs []tsRun `json:"runs"`
}

// tsRun is a run of seqs from First to the next run's First - 1.
type tsRun struct {
	First   uint64 `json:"first"`
	FirstTS int64  `json:"firstTs"`
	MaxTS   int64  `json:"maxTs"`
}

type mandate struct {
	First   uint64            `json:"first"`
	Planned uint64            `json:"planned,omitempty"`
	Steps   map[string]string `json:"steps"` // step id → status
}

type stepKey struct {
	Ord    uint64 `json:"ord"`
	Status string `json:"status"`
}

type openBlock struct {
	Seq  uint64        `json:"seq"` // its pty.block.begin
	Left pty.LeftBlock `json:"left"`
}

// New returns an empty model.
func New() *Model {
	return &Model{st: state{Mandates: map[string]*mandate{}, Keys: map[string]*stepKey{}, Blocks: map[string]*openBlock{}}}
}

// Covered implements engine.ResumableObserver: the log after it is fed.
func (m *Model) Covered() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.seq
}

// Observe implements engine.Observer.
func (m *Model) Observe(ev *events.Event) {
	var p events.Payload
	switch ev.Type {
	case events.TypeStepPlanned, events.TypeStepExecuting, events.TypeStepCompleted,
		events.TypeStepFailed, events.TypeStepNeedsReview, events.TypeStepReset,
		events.TypePtyBlockBegin, events.TypePtyBlockEnd:
		p, _ = ev.Decode() // nil: skipped, as every reader skips what it cannot read
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Seq != 0 && ev.Seq <= m.seq {
		return // covered by the snapshot
	}
	if ev.Seq != 0 {
		m.seq, m.eventID = ev.Seq, ev.ID
		n := len(m.st.Runs)
		if n == 0 || ev.Seq-m.st.Runs[n-1].First >= TSBlock || ev.TS/TSSpan != m.st.Runs[n-1].FirstTS/TSSpan {
			m.st.Runs = append(m.st.Runs, tsRun{First: ev.Seq, FirstTS: ev.TS, MaxTS: ev.TS})
		} else {
			m.st.Runs[n-1].MaxTS = max(m.st.Runs[n-1].MaxTS, ev.TS)
		}
	}
	if p != nil {
		m.apply(ev, p)
	}
}

func (m *Model) apply(ev *events.Event, p events.Payload) {
	switch p := p.(type) {
	case *events.PtyBlockBegin:
		if _, open := m.st.Blocks[p.Block.BlockID]; !open {
			m.st.Blocks[p.Block.BlockID] = &openBlock{Seq: ev.Seq}
		}
		b := m.st.Blocks[p.Block.BlockID]
		b.Left = pty.LeftBlock{ConversationID: ev.Stream, Block: p.Block}
		return
	case *events.PtyBlockEnd:
		delete(m.st.Blocks, p.Block.BlockID)
		return
	}
	// Step transitions: the view's records (one per planned step, one per
	// other transition) and the step state's statuses.
	mid, sid := steps.StepTarget(p)
	status := steps.NextStatus(p)
	key := func(mid, sid string) {
		k := m.st.Keys[mid+"/"+sid]
		if k == nil {
			m.st.Ord++
			k = &stepKey{Ord: m.st.Ord}
			m.st.Keys[mid+"/"+sid] = k
		}
		k.Status = status
		if status == events.StatusCompleted {
			// Final: a completed step never moves again (CheckTransition),
			// so the model keeps open work only, not history.
			delete(m.st.Keys, mid+"/"+sid)
		}
	}
	sm := mid
	if sm == "" {
		sm = ev.Stream
	}
	md := m.st.Mandates[sm]
	if md == nil {
		md = &mandate{First: ev.Seq, Steps: map[string]string{}}
		m.st.Mandates[sm] = md
	}
	if pl, ok := p.(*events.StepPlanned); ok {
		if md.Planned == 0 {
			md.Planned = ev.Seq
		}
		for _, s := range pl.Steps {
			key(mid, s.StepID)
			if _, ok := md.Steps[s.StepID]; !ok {
				md.Steps[s.StepID] = events.StatusPending
			}
		}
		return
	}
	key(mid, sid)
	md.Steps[sid] = status
	if status == events.StatusCompleted {
		for _, st := range md.Steps {
			if st != events.StatusCompleted {
				return
			}
		}
		delete(m.st.Mandates, sm) // every step completed: nothing left open
	}
}

// Seq is the last seq the model covers.
func (m *Model) Seq() uint64 { return m.Covered() }

// AwaitingReview lists "mandate/step" of the steps whose last record in
// steps/steps.jsonl is needs_review, in the order of their first record.
func (m *Model) AwaitingReview() []string { return m.stepsIn(events.StatusNeedsReview) }

// stepsIn lists "mandate/step" of the steps whose last status is status,
// in the order of their first record.
func (m *Model) stepsIn(status string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	type kv struct {
		k   string
		ord uint64
	}
	var ks []kv
	for k, v := range m.st.Keys {
		if v.Status == status {
			ks = append(ks, kv{k, v.Ord})
		}
	}
	slices.SortFunc(ks, func(a, b kv) int { return cmp.Compare(a.ord, b.ord) })
	out := make([]string, 0, len(ks))
	for _, x := range ks {
		out = append(out, x.k)
	}
	return out
}

// OpenBlocks lists the terminal blocks begun and not ended, in the order
// they began.
func (m *Model) OpenBlocks() []pty.LeftBlock {
	m.mu.RLock()
	defer m.mu.RUnlock()
	bs := make([]*openBlock, 0, len(m.st.Blocks))
	for _, b := range m.st.Blocks {
		bs = append(bs, b)
	}
	slices.SortFunc(bs, func(a, b *openBlock) int { return cmp.Compare(a.Seq, b.Seq) })
	out := make([]pty.LeftBlock, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Left)
	}
	return out
}

// OldestOpenBlock is the pty.block.begin of the oldest open block, 0 if
// none.
func (m *Model) OldestOpenBlock() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var oldest uint64
	for _, b := range m.st.Blocks {
		if oldest == 0 || b.Seq < oldest {
			oldest = b.Seq
		}
	}
	return oldest
}

// OldestOpenStep is the first step event of the oldest mandate with a step
// neither completed nor failed, 0 if none.
func (m *Model) OldestOpenStep() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var oldest uint64
	for _, md := range m.st.Mandates {
		open := false
		for _, s := range md.Steps {
			if s != events.StatusCompleted && s != events.StatusFailed {
				open = true
				break
			}
		}
		if !open {
			continue
		}
		seq := md.First
		if md.Planned != 0 && md.Planned < seq {
			seq = md.Planned
		}
		if oldest == 0 || seq < oldest {
			oldest = seq
		}
	}
	return oldest
}

// FirstTS returns the first seq in [from, last] whose event's ts satisfies
// match (which must hold for every ts above some bound: ts > t or ts >=
// t), last+1 if none. The timestamp index names the run of seqs to read
// through evs (at most TSBlock of them, within TSSpan of the bound); seqs
// the model does not cover yet are read too.
func (m *Model) FirstTS(ctx context.Context, evs func(from uint64) iter.Seq2[*events.Event, error], from, last uint64, match func(ts int64) bool) (uint64, error) {
	if from == 0 {
		from = 1
	}
	m.mu.RLock()
	covered := m.seq
	start := uint64(0)
	runs := m.st.Runs
	for i, r := range runs {
		if i+1 < len(runs) && runs[i+1].First <= from {
			continue // wholly before from
		}
		if match(r.MaxTS) {
			start = max(from, r.First)
			if start == r.First && start <= last && match(r.FirstTS) {
				// The run's first event is the answer: nothing to read
				// (a log whose events all lie in the window, as every
				// status on a recent home asks).
				m.mu.RUnlock()
				return start, nil
			}
			break
		}
	}
	m.mu.RUnlock()
	if start == 0 {
		if covered >= last {
			return last + 1, nil
		}
		start = max(from, covered+1)
	}
	n := 0
	for ev, err := range evs(start) {
		if err != nil {
			return 0, err
		}
		if ev.Seq > last {
			break
		}
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		if match(ev.TS) {
			return ev.Seq, nil
		}
	}
	return last + 1, nil
}

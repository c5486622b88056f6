package steps

import (
	"fmt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/wal"
)

// The step state's snapshot (issue 16): state/snapshots/steps.msgpack,
// written at checkpoints (engine.OnCheckpoint) once SnapshotEvery events
// have passed since the last one, and at close; loaded by NewJournal,
// which then subscribes the state for the log after its seq.
const (
	SnapshotModel = "steps"
	// snapSchema changes with the stored fields or their meaning.
	snapSchema = 1
	// SnapshotEvery is how many events a snapshot waits for.
	SnapshotEvery = 10_000
)

// SnapshotKind is the step state's snapshot kind (the read-model kit,
// package snapshot).
var SnapshotKind = snapshot.Kind{Name: SnapshotModel, Schema: snapSchema, Every: SnapshotEvery}

// SnapshotVersion is the code version a steps snapshot must carry.
func SnapshotVersion() string { return SnapshotKind.Version() }

// SnapshotFile is the step state's snapshot in h.
func SnapshotFile(h home.Home) string { return SnapshotKind.File(h.StateDir()) }

// stateSnap is State as stored: mandates in the order they appeared, each
// with its spec (which MandateState's JSON leaves out).
type stateSnap struct {
	Mandates []mandateSnap `json:"mandates"`
	LastSeq  uint64        `json:"lastSeq"`
	Errs     int           `json:"errs"`
}

type mandateSnap struct {
	M    *MandateState `json:"m"`
	Spec []byte        `json:"spec,omitempty"`
}

// Covered implements engine.ResumableObserver: the last event observed
// (of any type), or the one the loaded snapshot covers.
func (s *State) Covered() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.covered
}

// Encode implements snapshot.Model: mandates in the order they appeared,
// each with its spec.
func (s *State) Encode() ([]byte, uint64, string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sn := stateSnap{LastSeq: s.lastSeq, Errs: s.errs, Mandates: make([]mandateSnap, 0, len(s.order))}
	for _, id := range s.order {
		m := s.mandates[id]
		sn.Mandates = append(sn.Mandates, mandateSnap{M: m, Spec: m.Spec})
	}
	body, err := events.Marshal(&sn)
	return body, s.covered, s.coveredID, err
}

// WriteSnapshot stores the state at path unless fewer than every events
// passed since the last snapshot (every 0: whenever anything did), as
// snapshot.Written.Write.
func (s *State) WriteSnapshot(path string, every uint64) (bool, error) {
	return s.written.Write(SnapshotKind, path, s, every)
}

// Decode fills an empty state from a snapshot's body (snapshot.Model).
func (s *State) Decode(h snapshot.Header, body []byte) error {
	var sn stateSnap
	if err := events.Unmarshal(body, &sn); err != nil {
		return fmt.Errorf("%w: body: %v", snapshot.ErrInvalid, err)
	}
	mandates := make(map[string]*MandateState, len(sn.Mandates))
	order := make([]string, 0, len(sn.Mandates))
	for _, x := range sn.Mandates {
		m := x.M
		if m == nil || m.MandateID == "" || mandates[m.MandateID] != nil {
			return fmt.Errorf("%w: body holds an empty or repeated mandate", snapshot.ErrInvalid)
		}
		for _, st := range m.Steps {
			if st == nil {
				return fmt.Errorf("%w: mandate %s holds an empty step", snapshot.ErrInvalid, m.MandateID)
			}
		}
		m.Spec = x.Spec
		mandates[m.MandateID] = m
		order = append(order, m.MandateID)
	}
	s.mu.Lock()
	s.mandates, s.order, s.lastSeq, s.errs = mandates, order, sn.LastSeq, sn.Errs
	s.covered, s.coveredID, s.loaded = h.Seq, h.EventID, h.Seq
	s.mu.Unlock()
	s.written.Loaded(h.Seq) // after the unlock: a write holds written, then s.mu
	return nil
}

// snapshotWritten keeps the outcome of a snapshot write at a checkpoint
// for SnapshotErr; a failed write is retried at the next checkpoint.
func (j *Journal) snapshotWritten(_ bool, err error) {
	j.snapMu.Lock()
	j.snapErr = err
	j.snapMu.Unlock()
}

// snapshotHook writes the state's snapshot as at a checkpoint (final:
// whenever anything moved), as the engine's checkpoints do.
func (j *Journal) snapshotHook(final bool) {
	if j.snap != nil {
		j.snapshotWritten(j.snap.Checkpoint(final))
	}
}

// Load builds the step state of the log in h without an engine or the
// log's lock (commands without a daemon): the snapshot if it can be
// trusted, then the log after it (snapshot.FeedTail). read counts the
// events read after the snapshot (the whole log without a trusted one).
func Load(h home.Home) (st *State, read int, err error) {
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		return nil, 0, err
	}
	first, err := r.FirstSeq()
	if err != nil {
		return nil, 0, err
	}
	st = NewState()
	hd, body, err := snapshot.Read(SnapshotFile(h), SnapshotModel, SnapshotVersion())
	if err == nil && st.Decode(hd, body) != nil {
		st = NewState()
	}
	t, err := snapshot.FeedTail(r, first, st.Covered(), st.coveredID, st.Observe)
	if err == nil && t.Refused != "" {
		st = NewState()
		t, err = snapshot.FeedTail(r, first, 0, "", st.Observe)
	}
	if err != nil {
		return nil, 0, err
	}
	return st, t.Read, nil
}

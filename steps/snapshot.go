package steps

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cmlab/cmlab/engine"
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

// SnapshotVersion is the code version a steps snapshot must carry.
func SnapshotVersion() string { return fmt.Sprintf("%d/%s", snapSchema, snapshot.CodeVersion()) }

// SnapshotFile is the step state's snapshot in h.
func SnapshotFile(h home.Home) string {
	return filepath.Join(h.StateDir(), "snapshots", SnapshotModel+".msgpack")
}

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

// WriteSnapshot stores the state at path unless fewer than every events
// passed since the last snapshot (every 0: whenever anything did). A
// failed write leaves the old file; the next call retries.
func (s *State) WriteSnapshot(path string, every uint64) (bool, error) {
	s.mu.RLock()
	if s.covered == 0 || s.covered <= s.snapSeq || s.covered-s.snapSeq < every {
		s.mu.RUnlock()
		return false, nil
	}
	sn := stateSnap{LastSeq: s.lastSeq, Errs: s.errs, Mandates: make([]mandateSnap, 0, len(s.order))}
	for _, id := range s.order {
		m := s.mandates[id]
		sn.Mandates = append(sn.Mandates, mandateSnap{M: m, Spec: m.Spec})
	}
	body, err := events.Marshal(&sn)
	seq, id := s.covered, s.coveredID
	s.mu.RUnlock()
	if err != nil {
		return false, err
	}
	if err := snapshot.Write(path, snapshot.Header{Model: SnapshotModel, Version: SnapshotVersion(), Seq: seq, EventID: id}, body); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.snapSeq = max(s.snapSeq, seq)
	s.mu.Unlock()
	return true, nil
}

// LoadSnapshot fills an empty state from the snapshot at path if it can
// be trusted (snapshot.Check against a log whose first retained seq is
// first and last seq last). A missing file wraps os.ErrNotExist, any
// other refusal snapshot.ErrInvalid; the state is left empty on error.
func (s *State) LoadSnapshot(path string, first, last uint64, idAt func(uint64) (string, error)) error {
	h, body, err := snapshot.Read(path, SnapshotModel, SnapshotVersion())
	if err != nil {
		return err
	}
	if err := snapshot.Check(h, first, last, idAt); err != nil {
		return err
	}
	return s.loadBody(h, body)
}

// loadBody fills an empty state from a snapshot's body.
func (s *State) loadBody(h snapshot.Header, body []byte) error {
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
	defer s.mu.Unlock()
	s.mandates, s.order, s.lastSeq, s.errs = mandates, order, sn.LastSeq, sn.Errs
	s.covered, s.coveredID, s.loaded, s.snapSeq = h.Seq, h.EventID, h.Seq, h.Seq
	return nil
}

// openState builds the journal's state: the snapshot in eng's home if
// trusted (else the reason it was refused, and an empty state), then,
// unless eng is read-only, a checkpoint hook that writes it.
func openState(eng *engine.Engine) (*State, string) {
	path := SnapshotFile(eng.Home())
	if !eng.ReadOnly() {
		snapshot.RemoveStale(path)
	}
	l := eng.Log()
	st := NewState()
	refused := ""
	err := st.LoadSnapshot(path, l.FirstSeq(), l.LastSeq(), func(seq uint64) (string, error) {
		ev, err := l.Read(seq)
		if err != nil {
			return "", err
		}
		return ev.ID, nil
	})
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			refused = err.Error()
		}
		st = NewState()
	}
	return st, refused
}

// snapshotHook writes st's snapshot at eng's checkpoints; a failure is
// kept for SnapshotErr and retried at the next checkpoint.
func (j *Journal) snapshotHook(final bool) {
	every := uint64(SnapshotEvery)
	if final {
		every = 0
	}
	_, err := j.state.WriteSnapshot(SnapshotFile(j.eng.Home()), every)
	j.snapMu.Lock()
	j.snapErr = err
	j.snapMu.Unlock()
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
	if err == nil && st.loadBody(hd, body) != nil {
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

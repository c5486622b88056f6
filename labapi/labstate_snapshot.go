package labapi

import (
	"fmt"
	"maps"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/vmihailenco/msgpack/v5"
)

// The lab state's snapshot (issue 16): state/snapshots/labstate.msgpack,
// written at checkpoints (engine.OnCheckpoint) once labSnapEvery events
// have passed since the last one, and at close. The file is its own
// reference: it names the seq it covers and that event's id.
const (
	labSnapModel = "labstate"
	// labSnapSchema changes with labState's fields or their meaning.
	labSnapSchema = 1
	labSnapEvery  = 10_000
)

// labSnapKind is the lab state's snapshot kind (the read-model kit,
// package snapshot): its code version follows the kit's one rule.
var labSnapKind = snapshot.Kind{Name: labSnapModel, Schema: labSnapSchema, Every: labSnapEvery}

func labSnapVersion() string { return labSnapKind.Version() }

// LabSnapshotFile is the lab state's snapshot in h.
func LabSnapshotFile(h home.Home) string { return labSnapKind.File(h.StateDir()) }

// labSnap is labState as stored: runs and experiments in log order.
type labSnap struct {
	Runs     sizedSlice[events.LabRun]        `json:"runs"`
	ByReal   map[string]string                `json:"byReal"`
	Exps     sizedSlice[events.LabExperiment] `json:"exps"`
	Sessions map[string]int64                 `json:"sessions"`
}

// sizedSlice decodes a msgpack array into a slice allocated once at its
// length: the decoder's own growth (in steps of 10,000 elements) copies a
// large snapshot's runs over and over. Encoded as a plain array.
type sizedSlice[T any] []T

// DecodeMsgpack implements msgpack.CustomDecoder.
func (s *sizedSlice[T]) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*s = nil
		return nil
	}
	// Each element takes at least one byte: a length beyond what is left
	// is refused by the first short read, not allocated up front.
	out := make([]T, 0, min(n, 1<<20))
	for range n {
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out = append(out, v)
	}
	*s = out
	return nil
}

// Covered implements engine.ResumableObserver: the log after it is fed.
func (st *labState) Covered() uint64 {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.seq
}

// Encode implements snapshot.Model: runs and experiments in log order.
func (st *labState) Encode() ([]byte, uint64, string, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	sn := labSnap{ByReal: st.byReal, Sessions: st.sessions,
		Runs: make(sizedSlice[events.LabRun], 0, len(st.runOrder)), Exps: make(sizedSlice[events.LabExperiment], 0, len(st.expOrder))}
	for _, id := range st.runOrder {
		sn.Runs = append(sn.Runs, *st.runs[id])
	}
	for _, id := range st.expOrder {
		sn.Exps = append(sn.Exps, *st.exps[id])
	}
	body, err := events.Marshal(&sn)
	return body, st.seq, st.eventID, err
}

// Decode implements snapshot.Model.
func (st *labState) Decode(h snapshot.Header, body []byte) error { return st.loadBody(h, body) }

// writeSnapshot stores the state at path unless fewer than every events
// passed since the last snapshot (every 0: whenever anything did).
func (st *labState) writeSnapshot(path string, every uint64) (bool, error) {
	st.mu.RLock()
	snapSeq := st.snapSeq
	st.mu.RUnlock()
	ok, err := snapshot.NewWriter(labSnapKind, path, st, snapSeq).Write(every)
	if ok {
		st.mu.Lock()
		st.snapSeq = max(st.snapSeq, st.seq)
		st.mu.Unlock()
	}
	return ok, err
}

// loadBody fills an empty state from a snapshot's body.
func (st *labState) loadBody(h snapshot.Header, body []byte) error {
	var sn labSnap
	if err := events.Unmarshal(body, &sn); err != nil {
		return fmt.Errorf("%w: body: %v", snapshot.ErrInvalid, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// The state is empty: its maps are made at their final size (1M runs
	// grew one by rehashing), and hold pointers into the decoded slices
	// instead of a copy of each run (entries are replaced, never changed
	// in place, so a slice outlives its replaced elements only).
	if len(st.runs) == 0 {
		st.runs = make(map[string]*events.LabRun, len(sn.Runs))
		st.runOrder = make([]string, 0, len(sn.Runs))
	}
	if len(st.exps) == 0 {
		st.exps = make(map[string]*events.LabExperiment, len(sn.Exps))
		st.expOrder = make([]string, 0, len(sn.Exps))
	}
	for i := range sn.Runs {
		r := &sn.Runs[i]
		st.runs[r.RunID] = r
		st.runOrder = append(st.runOrder, r.RunID)
	}
	for i := range sn.Exps {
		e := &sn.Exps[i]
		st.exps[e.ExperimentID] = e
		st.expOrder = append(st.expOrder, e.ExperimentID)
	}
	if len(st.byReal) == 0 && sn.ByReal != nil {
		st.byReal = sn.ByReal
	} else {
		maps.Copy(st.byReal, sn.ByReal)
	}
	if len(st.sessions) == 0 && sn.Sessions != nil {
		st.sessions = sn.Sessions
	} else {
		maps.Copy(st.sessions, sn.Sessions)
	}
	st.seq, st.eventID, st.snapSeq = h.Seq, h.EventID, h.Seq
	return nil
}

// openLabState builds the lab state from its snapshot, if trusted (a
// rejected one is logged), and subscribes it for the log after it
// (snapshot.Attach); unless read-only, its snapshot is written at the
// engine's checkpoints.
func (s *Server) openLabState() error {
	eng := s.opts.Engine
	path := LabSnapshotFile(eng.Home())
	st, _, refused, err := snapshot.Attach(eng, labSnapKind, path, newLabState, func(st *labState) error { return eng.Subscribe(st) },
		func(_ bool, err error) {
			if err != nil {
				// Only the next start's catch-up grows; retried at the next checkpoint.
				s.log.Warn("lab state snapshot not written", "error", err.Error())
			}
		})
	if refused != "" {
		s.log.Warn("lab state snapshot ignored, rebuilding from the log", "file", eng.Home().Rel(path), "reason", refused)
	}
	if err != nil {
		return err
	}
	s.lab = st
	return nil
}

// LabSnapshotCovers is the seq the Lab state's snapshot in h covers, read
// whole (CRC checked) and of this code version; an error when it is
// missing or untrusted (the daemon's read-model table, package daemon).
func LabSnapshotCovers(h home.Home) (uint64, error) { return labSnapKind.Covers(LabSnapshotFile(h)) }

package retention

import (
	"errors"
	"fmt"
	"iter"
	"os"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/wal"
)

// The model's snapshot: state/snapshots/retention.msgpack (the read-model
// kit, package snapshot).
const (
	ModelName = "retention"
	// schema changes with state's fields or their meaning.
	schema = 3
	// SnapshotEvery: the daemon writes the snapshot at a checkpoint once
	// this many events passed since the last one (the file is small; the
	// tail a CLI command reads after it stays short).
	SnapshotEvery = 1000
)

// Kind is the model's snapshot kind.
var Kind = snapshot.Kind{Name: ModelName, Schema: schema, Every: SnapshotEvery}

// Version is the code version a snapshot must carry to be trusted.
func Version() string { return Kind.Version() }

// SnapshotFile is the model's snapshot in h.
func SnapshotFile(h home.Home) string { return Kind.File(h.StateDir()) }

// Encode implements snapshot.Model.
func (m *Model) Encode() ([]byte, uint64, string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	body, err := events.Marshal(&m.st)
	return body, m.seq, m.eventID, err
}

// WriteSnapshot stores the model at path unless fewer than every events
// passed since the last snapshot (every 0: whenever anything did), as
// snapshot.Written.Write.
func (m *Model) WriteSnapshot(path string, every uint64) (bool, error) {
	return m.written.Write(Kind, path, m, every)
}

// LoadSnapshot fills an empty model from the snapshot at path if it can be
// trusted (snapshot.Kind.Load). A missing file wraps os.ErrNotExist; any
// other refusal wraps snapshot.ErrInvalid. The model is left empty on any
// error.
func (m *Model) LoadSnapshot(path string, first, last uint64, idAt func(uint64) (string, error)) error {
	_, err := Kind.Load(m, path, first, last, idAt)
	return err
}

// Decode fills an empty model from a snapshot's body (snapshot.Model).
func (m *Model) Decode(h snapshot.Header, body []byte) error {
	st := New().st
	if err := events.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("%w: body: %v", snapshot.ErrInvalid, err)
	}
	if st.Mandates == nil || st.Keys == nil || st.Blocks == nil {
		return fmt.Errorf("%w: body lacks a table", snapshot.ErrInvalid)
	}
	for _, md := range st.Mandates {
		if md == nil || md.Steps == nil {
			return fmt.Errorf("%w: body holds an empty mandate", snapshot.ErrInvalid)
		}
	}
	for _, k := range st.Keys {
		if k == nil {
			return fmt.Errorf("%w: body holds an empty step", snapshot.ErrInvalid)
		}
	}
	for _, b := range st.Blocks {
		if b == nil {
			return fmt.Errorf("%w: body holds an empty block", snapshot.ErrInvalid)
		}
	}
	m.mu.Lock()
	m.st = st
	m.seq, m.eventID = h.Seq, h.EventID
	m.mu.Unlock()
	m.written.Loaded(h.Seq) // after the unlock: a write holds written, then m.mu
	return nil
}

// ReaderIDAt is snapshot.Check's idAt over a reader of the log from a seq
// on: a wal.Reader, or a compaction's source. (Over an open wal.Log,
// snapshot.Kind.LoadLog asks it.)
func ReaderIDAt(r interface {
	Events(from uint64) iter.Seq2[*events.Event, error]
}) func(uint64) (string, error) {
	return func(seq uint64) (string, error) {
		for ev, err := range r.Events(seq) {
			if err != nil {
				return "", err
			}
			if ev.Seq != seq {
				break
			}
			return ev.ID, nil
		}
		return "", fmt.Errorf("seq %d not in the log", seq)
	}
}

// Loaded says how Load built a model.
type Loaded struct {
	// SnapshotSeq is the seq the trusted snapshot covered, 0 without one.
	SnapshotSeq uint64
	// Refused is why a snapshot file was not trusted ("" if it was, or
	// there was none).
	Refused string
	// Read counts the events read from the log after the snapshot.
	Read int
	// First and Last are the log's first retained and last seq.
	First, Last uint64
}

// Load builds the model of the log in h without the log's lock (a daemon
// may hold it): the snapshot, if trusted, then the log after it, read
// with wal.OpenReader to the end of what is on disk. One pass over the
// log (snapshot.FeedTail) serves both the snapshot's check (the event at
// its seq must carry its event id) and the tail; the log's last segment is read only if the
// tail reaches it, which also finds damage there (an error wrapping
// wal.ErrCorrupt). Nothing is read before the snapshot's seq unless the
// snapshot is refused.
func Load(h home.Home) (*Model, Loaded, error) {
	var info Loaded
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		return nil, info, err
	}
	if info.First, err = r.FirstSeq(); err != nil {
		return nil, info, err
	}
	m := New()
	hd, body, err := snapshot.Read(SnapshotFile(h), ModelName, Version())
	if err == nil {
		err = m.Decode(hd, body)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		info.Refused = err.Error()
	}
	t, err := snapshot.FeedTail(r, info.First, m.Covered(), m.eventID, m.Observe)
	if err == nil && t.Refused != "" {
		// Rebuilt from the retained log.
		info.Refused, m = t.Refused, New()
		t, err = snapshot.FeedTail(r, info.First, 0, "", m.Observe)
	}
	if err != nil {
		return nil, info, err
	}
	// Last: the seq before the retained log when nothing follows it.
	info.Read, info.Last = t.Read, max(t.Last, info.First-1)
	if info.Refused == "" {
		info.SnapshotSeq = hd.Seq
	}
	return m, info, nil
}

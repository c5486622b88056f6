package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// The read-model kit: what every model kept in a snapshot shares — its
// file, its code-version rule, the gating of its writes, its load and
// check at start, and its attachment to the engine. A model is a small
// implementation of Model plus a Kind; adding one is a file plus a row in
// the daemon's table (daemon.ReadModels).

// Model is a read model kept in a snapshot: an observer of the log that
// can say what it covers, encode itself and be filled from a body.
type Model interface {
	// Observe applies one event of the log (engine.Observer).
	Observe(ev *events.Event)
	// Covered is the seq of the last event the model reflects (0: none).
	Covered() uint64
	// Encode returns the model's body and the seq and id of the last
	// event it covers, taken together under the model's lock.
	Encode() (body []byte, seq uint64, id string, err error)
	// Decode fills the empty model from the body of a trusted snapshot
	// covering h; an error wraps ErrInvalid and leaves it unusable.
	Decode(h Header, body []byte) error
}

// Kind names a model's snapshot and its rules.
type Kind struct {
	// Name is the model's name: its file state/snapshots/<Name>.msgpack
	// and the model a snapshot's header must name.
	Name string
	// Schema changes with the body's fields or their meaning.
	Schema int
	// Every is how many events a snapshot waits for at a checkpoint.
	Every uint64
}

// Version is the code version a snapshot of k must carry to be trusted:
// the schema and the build (CodeVersion), the one rule of every model.
func (k Kind) Version() string { return fmt.Sprintf("%d/%s", k.Schema, CodeVersion()) }

// File is k's snapshot under stateDir (home.Home.StateDir).
func (k Kind) File(stateDir string) string {
	return filepath.Join(stateDir, "snapshots", k.Name+".msgpack")
}

// Covers is the seq the snapshot at path covers, read whole (CRC checked)
// and of k's code version; an error when it is missing or untrusted.
func (k Kind) Covers(path string) (uint64, error) {
	h, _, err := Read(path, k.Name, k.Version())
	return h.Seq, err
}

// Load fills the empty model m from the snapshot of k at path if it can be
// trusted: whole, of k's code version, and covering an event the log
// holds with the same id (Check against a log whose first retained seq is
// first and last seq last). A missing file wraps os.ErrNotExist, any other
// refusal ErrInvalid; m must not be used after an error. It returns the
// header loaded.
func (k Kind) Load(m Model, path string, first, last uint64, idAt func(uint64) (string, error)) (Header, error) {
	h, body, err := Read(path, k.Name, k.Version())
	if err != nil {
		return Header{}, err
	}
	if err := Check(h, first, last, idAt); err != nil {
		return Header{}, err
	}
	if err := m.Decode(h, body); err != nil {
		return Header{}, err
	}
	return h, nil
}

// LoadLog is Load checked against the live log l.
func (k Kind) LoadLog(m Model, path string, l *wal.Log) (Header, error) {
	return k.Load(m, path, l.FirstSeq(), l.LastSeq(), func(seq uint64) (string, error) {
		ev, err := l.Read(seq)
		if err != nil {
			return "", err
		}
		return ev.ID, nil
	})
}

// Writer writes one model's snapshot, gated: only once Every events
// passed since the last one it wrote or loaded.
type Writer struct {
	Kind  Kind
	Path  string
	Model Model
	// FS is the seam of its writes (WriteFS); nil is the real file system.
	FS home.FS

	mu      sync.Mutex // one write at a time
	snapSeq uint64     // the seq the file on disk covers
}

// NewWriter is a Writer of m's snapshot of kind k at path, whose file
// covers loaded (the seq of the snapshot loaded at start, 0 if none).
func NewWriter(k Kind, path string, m Model, loaded uint64) *Writer {
	return &Writer{Kind: k, Path: path, Model: m, snapSeq: loaded}
}

// Write stores the model unless fewer than every events passed since the
// file's seq (every 0: whenever anything did). It reports whether it
// wrote. A failed write leaves the old file; the next call retries.
func (w *Writer) Write(every uint64) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.Model.Covered(); c == 0 || c <= w.snapSeq || c-w.snapSeq < every {
		return false, nil
	}
	body, seq, id, err := w.Model.Encode()
	if err != nil {
		return false, err
	}
	if err := WriteFS(w.FS, w.Path, Header{Model: w.Kind.Name, Version: w.Kind.Version(), Seq: seq, EventID: id}, body); err != nil {
		return false, err
	}
	w.snapSeq = max(w.snapSeq, seq)
	return true, nil
}

// Seq is the seq the file on disk covers: of the snapshot loaded at
// start or last written, 0 if none.
func (w *Writer) Seq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snapSeq
}

// Written is the seq a model's snapshot file covers, for a model that
// also writes its snapshot itself outside Attach (a one-shot command's
// WriteSnapshot of the model it caught up): set by the snapshot loaded at
// start, advanced by each write. Its zero value is a model with no file.
type Written struct {
	mu  sync.Mutex // one write at a time
	seq uint64
}

// Loaded records the seq of the snapshot a model was filled from.
func (w *Written) Loaded(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq = seq
}

// Write stores m's snapshot of kind k at path as a Writer does: unless
// fewer than every events passed since the seq the file covers (every 0:
// whenever anything did). It reports whether it wrote; a failed write
// leaves the old file and the next call retries.
func (w *Written) Write(k Kind, path string, m Model, every uint64) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sw := NewWriter(k, path, m, w.seq)
	wrote, err := sw.Write(every)
	w.seq = sw.Seq()
	return wrote, err
}

// Checkpoint writes at an engine checkpoint: once Kind.Every events
// passed, or whenever anything did at the final one (close).
func (w *Writer) Checkpoint(final bool) (bool, error) {
	every := w.Kind.Every
	if final {
		every = 0
	}
	return w.Write(every)
}

// Engine is what Attach needs of the engine (engine.Engine).
type Engine interface {
	Log() *wal.Log
	ReadOnly() bool
	OnCheckpoint(func(final bool))
	// FS is the seam of the engine's durable file writes
	// (engine.Options.FS), the snapshots' among them.
	FS() home.FS
}

// Attach is the one start of a model kept in a snapshot over a live
// engine: remove the temporary files of an interrupted write (unless
// read-only), fill fresh() from the snapshot at path if it can be
// trusted, else start from an empty one (refused says why, "" for a
// missing file), subscribe it (subscribe: the engine's Subscribe, which
// feeds the log after what it covers) and, unless read-only, write its
// snapshot at the engine's checkpoints through the engine's FS, telling onWrite (when set) the
// outcome of each (a failed write is retried at the next checkpoint). It
// returns the model's Writer (nil when read-only).
func Attach[M Model](eng Engine, k Kind, path string, fresh func() M, subscribe func(M) error, onWrite func(wrote bool, err error)) (m M, w *Writer, refused string, err error) {
	if !eng.ReadOnly() {
		RemoveStale(path)
	}
	m = fresh()
	h, lerr := k.LoadLog(m, path, eng.Log())
	if lerr != nil {
		if !errors.Is(lerr, os.ErrNotExist) {
			refused = lerr.Error()
		}
		m, h = fresh(), Header{}
	}
	if err := subscribe(m); err != nil {
		return m, nil, refused, err
	}
	if eng.ReadOnly() {
		return m, nil, refused, nil
	}
	w = NewWriter(k, path, m, h.Seq)
	w.FS = eng.FS()
	eng.OnCheckpoint(func(final bool) {
		wrote, err := w.Checkpoint(final)
		if onWrite != nil {
			onWrite(wrote, err)
		}
	})
	return m, w, refused, nil
}

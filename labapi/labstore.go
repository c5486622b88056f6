package labapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/reqindex"
	"github.com/cmlab/cmlab/wal"
)

// labStore is the read model of runs, experiments and sessions (issue
// 26): on disk in state/labstore.db (labstore_file.go), read per request;
// the heap holds only the changes not yet written (at most
// labMaxPending). It is an engine observer: brought up to the log when
// opened, then fed each event after it is durable (in the committer,
// before the appender is acknowledged), which puts the event's change in
// the pending batch; a flusher (reqindex.Live, as the request-id
// index's) writes the batch and the covered seq in one fsynced
// transaction every labFlushInterval or labFlushAt changes. Point
// reads see pending, flushing and stored records alike (an acknowledged
// import is found at once); lists first write what is pending, then read
// the file in short transactions.
//
// The file is derived: when it is missing, cannot be opened, is of
// another format, or covers an event the log does not hold (by seq and
// id), it is rebuilt from the log at open. Open's cost does not grow with
// the store: its pages and every value's CRC are checked after open by a
// goroutine (startVerification) that, on failure, rebuilds the file
// beside the old one while the old one serves, then swaps it in. A value
// failing its CRC on a read is an error answer and starts that rebuild at
// once.
type labStore struct {
	path string
	log  *wal.Log
	tmp  bool // path is a private copy (read-only engine): removed at close

	dbMu     sync.RWMutex // held for reading around every use of db; for writing to swap or close it
	db       *bolt.DB
	dbClosed bool // under dbMu

	// live holds the changes observed and not yet in the file, flushes
	// them and swaps a rebuilt file in (reqindex.Live).
	live     *reqindex.Live[*labBatch]
	verified <-chan struct{} // closed when the check after open (and any rebuild) ends

	rebuilding bool // under live.Locked
	rebuildWG  sync.WaitGroup
	hook       func(phase string)
	batch      int
	fs         home.FS
	warn       func(msg string, args ...any)
}

const (
	labFlushInterval = time.Second
	labFlushAt       = 1024
	labMaxPending    = 16384
	labCatchUpBatch  = 16384
	labListChunk     = 256
	labTrimAfter     = 4096 // records a list reads before its pages are trimmed from RSS
)

// labBatch is the changes observed and not yet stored, in log order, with
// the newest record of each key for point reads.
type labBatch struct {
	ops      []*labOp
	runs     map[string]*events.LabRun
	byReal   map[string]string
	exps     map[string]*events.LabExperiment
	sessions map[string]int64
}

func newLabBatch() *labBatch {
	return &labBatch{runs: map[string]*events.LabRun{}, byReal: map[string]string{},
		exps: map[string]*events.LabExperiment{}, sessions: map[string]int64{}}
}

func (b *labBatch) Len() int { return len(b.ops) }

// Before adds newer's changes after b's.
func (b *labBatch) Before(newer *labBatch) *labBatch {
	for _, op := range newer.ops {
		b.add(op)
	}
	return b
}

func (b *labBatch) add(op *labOp) {
	b.ops = append(b.ops, op)
	switch {
	case op.run != nil:
		b.runs[op.run.RunID] = op.run
		b.byReal[op.run.ArtifactsDirRealpath] = op.run.RunID
	case op.exp != nil:
		b.exps[op.exp.ExperimentID] = op.exp
	default:
		b.sessions[op.session] = op.ts
	}
}

// LabStoreFile is the Lab store of h.
func LabStoreFile(h home.Home) string { return filepath.Join(h.StateDir(), "labstore.db") }

// labStoreOptions configure openLabStore.
type labStoreOptions struct {
	path     string   // LabStoreFile
	log      *wal.Log // the home's open log
	readOnly bool     // work on a private copy of the file
	warn     func(msg string, args ...any)
	// Tests only: hook is called at each phase of a write (the
	// labPhase* names), batch is the catch-up's events per transaction.
	hook  func(phase string)
	batch int
	fs    home.FS // a rebuild's rename and directory fsync (nil: the OS)
}

// The phases of the store's writes a crash test stops at (hook).
const (
	labPhaseCreated        = reqindex.PhaseCreated        // an empty file made, nothing caught up
	labPhaseCatchUp        = reqindex.PhaseCatchUp        // a catch-up batch committed, more to come
	labPhaseCaughtUp       = reqindex.PhaseCaughtUp       // the catch-up's last batch committed, the file not yet synced
	labPhaseFlushWrite     = reqindex.PhaseFlushWrite     // a flush about to write its batch
	labPhaseFlushed        = reqindex.PhaseFlushed        // a flush's transaction committed, covered not yet moved
	labPhaseRebuildBuilt   = reqindex.PhaseRebuildBuilt   // a rebuild's new file whole, not renamed
	labPhaseRebuildRenamed = reqindex.PhaseRebuildRenamed // renamed over the old file, not swapped in
)

// openLabStore opens (or rebuilds) the store of l at path and brings it up
// to the log's last seq. A read-only caller gets a private copy of the
// file (in the system's temporary directory, removed at close), so that
// it can catch up without writing the home.
func openLabStore(ctx context.Context, o labStoreOptions) (*labStore, error) {
	path, l, readOnly, warn := o.path, o.log, o.readOnly, o.warn
	if warn == nil {
		warn = func(string, ...any) {}
	}
	if o.hook == nil {
		o.hook = func(string) {}
	}
	if o.batch <= 0 {
		o.batch = labCatchUpBatch
	}
	st := &labStore{path: path, log: l, warn: warn, hook: o.hook, batch: o.batch, fs: o.fs}
	if readOnly {
		p, err := privateCopy(path)
		if err != nil {
			return nil, err
		}
		st.path, st.tmp = p, true
	} else {
		os.Remove(path + ".rebuild") // an interrupted rebuild's
	}
	f, err := st.file().Open(ctx, st.path, "store", func() (*bolt.DB, uint64, string, error) {
		return openLabStoreFile(st.path, false)
	})
	if err != nil {
		st.removeTmp()
		return nil, err
	}
	st.db = f.DB
	var rebuilt string
	if f.Made && f.Found {
		rebuilt = f.Why
	}
	reqindex.TrimMapped(st.db)
	st.startLive(f.Covered, f.CoveredID, rebuilt, st.closeFile)
	if f.Made {
		st.live.NoVerification() // new: nothing to check
	}
	return st, nil
}

// startLive starts the flusher of the file caught up to covered
// (reqindex.Live); closeFile closes the file at Close.
func (st *labStore) startLive(covered uint64, coveredID, rebuilt string, closeFile func() error) {
	st.live = reqindex.StartLive(reqindex.LiveOptions[*labBatch]{File: st.file(), Path: st.path,
		FlushInterval: labFlushInterval, FlushAt: labFlushAt, MaxPending: labMaxPending,
		NewPending: newLabBatch, Write: st.write, WriteFailed: st.writeFailed,
		Install: st.install, CloseFile: closeFile, ErrClosed: errLabStoreClosed,
	}, covered, coveredID, rebuilt)
	st.verified, _ = st.live.Verified()
}

// labStoreReader is a store over db, a file the caller opened read-only
// and closes after the store's Close: nothing is observed or written to
// it, and a damaged value is an error, never a rebuild.
func labStoreReader(db *bolt.DB, covered uint64, coveredID string) *labStore {
	st := &labStore{db: db, rebuilding: true, warn: func(string, ...any) {}, hook: func(string) {}}
	st.startLive(covered, coveredID, "", func() error { return nil })
	st.live.NoVerification()
	return st
}

// privateCopy copies the file at path (if any) to a new temporary file.
func privateCopy(path string) (string, error) {
	f, err := os.CreateTemp("", "cmlab-labstore-*.db")
	if err != nil {
		return "", fmt.Errorf("labstore: read-only copy: %w", err)
	}
	name := f.Name()
	if b, err := os.ReadFile(path); err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", fmt.Errorf("labstore: read-only copy: %w", err)
		}
		return name, nil
	}
	f.Close()
	os.Remove(name) // none to copy: created empty by createLabStore
	return name, nil
}

func (st *labStore) removeTmp() {
	if st.tmp {
		os.Remove(st.path)
	}
}

// file is the store as a derived file of the log (reqindex.DerivedFile):
// its batches are labCatchUp, its catch-up commits without fsync and
// syncs the file once at the end (a first start is not one fsync per
// batch).
func (st *labStore) file() *reqindex.DerivedFile {
	return &reqindex.DerivedFile{Name: "labstore", Log: st.log, Batch: st.batch, SyncOnce: true, Hook: st.hook, FS: st.fs,
		NewBatch: func() reqindex.Batch { return &labCatchUp{} },
		Create:   func(path string) (*bolt.DB, error) { return createLabStore(path, st.log.LastSeq()) }}
}

// labCatchUp is the changes of a run of events a catch-up writes.
type labCatchUp struct{ ops []*labOp }

func (c *labCatchUp) Add(ev *events.Event) {
	if op := labOpOf(ev); op != nil {
		c.ops = append(c.ops, op)
	}
}

func (c *labCatchUp) Write(db *bolt.DB, seq uint64, id string) error {
	return writeLabOps(db, c.ops, seq, id)
}

func (c *labCatchUp) Reset() { c.ops = c.ops[:0] }

// writeLabOps applies ops and stores the covered seq in one transaction.
// A panic of bbolt on a damaged page is an error.
func writeLabOps(db *bolt.DB, ops []*labOp, seq uint64, id string) (err error) {
	defer reqindex.FaultsPanic()()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: bbolt panicked: %v", errLabStoreCorrupt, p)
		}
	}()
	err = db.Update(func(tx *bolt.Tx) error {
		w, err := newLSWriter(tx)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if err := w.apply(op); err != nil {
				return err
			}
		}
		return w.finish(seq, id)
	})
	if err != nil {
		return fmt.Errorf("labstore: write: %w", err)
	}
	return nil
}

// Covered implements engine.ResumableObserver.
func (st *labStore) Covered() uint64 { return st.live.State().Observed }

// DurableCovered is the seq the file on disk covers.
func (st *labStore) DurableCovered() uint64 { return st.live.State().Durable }

// Observe implements engine.Observer. After Close it does nothing: the
// next open reads the event from the log.
func (st *labStore) Observe(ev *events.Event) {
	op := labOpOf(ev)
	st.live.Observe(ev, func(pending, _ *labBatch) bool {
		if op == nil {
			return false
		}
		pending.add(op)
		return true
	})
}

// flush writes the pending changes and the observed seq to the file.
func (st *labStore) flush() error { return st.live.Flush() }

// write stores a flush's batch in the open file (reqindex.LiveOptions).
func (st *labStore) write(b *labBatch, seq uint64, id string) error {
	st.dbMu.RLock()
	defer st.dbMu.RUnlock()
	return writeLabOps(st.db, b.ops, seq, id)
}

// writeFailed starts the rebuild of a file a flush found damaged.
func (st *labStore) writeFailed(err error) {
	if errors.Is(err, errLabStoreCorrupt) {
		st.damaged(err)
	}
}

var errLabStoreClosed = errors.New("labstore: closed")

// Close writes what is pending and closes the file.
func (st *labStore) Close() error { return st.live.Close() }

// closeFile closes the file at Close, after the last flush and any
// rebuild.
func (st *labStore) closeFile() error {
	st.rebuildWG.Wait()
	st.dbMu.Lock()
	st.dbClosed = true
	err := st.db.Close()
	st.dbMu.Unlock()
	st.removeTmp()
	return err
}

// view runs fn in a read transaction of the file; a panic of bbolt or a
// value failing its CRC is an error that starts a rebuild.
func (st *labStore) view(fn func(tx *bolt.Tx) error) (err error) {
	if st.live.State().Closed {
		return errLabStoreClosed
	}
	func() {
		st.dbMu.RLock()
		defer st.dbMu.RUnlock()
		defer reqindex.FaultsPanic()()
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: bbolt panicked: %v", errLabStoreCorrupt, p)
			}
		}()
		err = st.db.View(fn)
	}()
	if errors.Is(err, errLabStoreCorrupt) {
		st.damaged(err)
	}
	return err
}

// sync writes what is pending, so that a list read from the file sees
// every change observed before it.
func (st *labStore) sync() error {
	if ls := st.live.State(); ls.Unflushed == 0 && !ls.Flushing {
		return nil
	}
	return st.flush()
}

// run is the run of id (pending changes first).
func (st *labStore) run(id string) (events.LabRun, bool, error) {
	return record(st, func(b *labBatch) map[string]*events.LabRun { return b.runs }, lsRuns, lsRunIdx, id)
}

// record is the record of id: its newest change not yet in the file,
// else the file's (ids: id to index key, idx: index key to record).
func record[T any](st *labStore, of func(*labBatch) map[string]*T, ids, idx []byte, id string) (T, bool, error) {
	r, ok := unstored(st, of, id)
	if ok {
		return *r, true, nil
	}
	var rec T
	found := false
	err := st.view(func(tx *bolt.Tx) error {
		var err error
		found, err = getRecord(tx.Bucket(ids), tx.Bucket(idx), id, &rec)
		return err
	})
	return rec, found, err
}

// unstored is the newest value of key among the changes not yet in the
// file: the pending ones, then those a flush is writing.
func unstored[V any](st *labStore, of func(*labBatch) map[string]V, key string) (v V, ok bool) {
	st.live.Unstored(func(b *labBatch) bool {
		v, ok = of(b)[key]
		return ok
	})
	return v, ok
}

// getRecord reads the record of id through its index key.
func getRecord(ids, idx *bolt.Bucket, id string, into any) (bool, error) {
	if id == "" || len(id) > maxLSKey {
		return false, nil
	}
	k, err := lsGet(ids, []byte(id))
	if err != nil || k == nil {
		return false, err
	}
	v, err := lsGet(idx, k)
	if err != nil {
		return false, err
	}
	if v == nil {
		return false, fmt.Errorf("%w: %q names no record", errLabStoreCorrupt, id)
	}
	if err := decodeRecord(v, into); err != nil {
		return false, fmt.Errorf("%w: %q: %v", errLabStoreCorrupt, id, err)
	}
	return true, nil
}

// runByRealpath is the newest run imported from the directory real.
func (st *labStore) runByRealpath(real string) (events.LabRun, bool, error) {
	id, ok := unstored(st, func(b *labBatch) map[string]string { return b.byReal }, real)
	if !ok {
		if !lsKeyOK(real) {
			return events.LabRun{}, false, nil
		}
		err := st.view(func(tx *bolt.Tx) error {
			v, err := lsGet(tx.Bucket(lsByReal), []byte(real))
			id, ok = string(v), v != nil
			return err
		})
		if err != nil || !ok {
			return events.LabRun{}, false, err
		}
	}
	run, found, err := st.run(id)
	if err == nil && !found {
		err = fmt.Errorf("%w: %q names run %s, which the store lacks", errLabStoreCorrupt, real, id)
	}
	return run, found, err
}

// experiment is the last record of experiment id.
func (st *labStore) experiment(id string) (events.LabExperiment, bool, error) {
	return record(st, func(b *labBatch) map[string]*events.LabExperiment { return b.exps }, lsExps, lsExpIdx, id)
}

// sessionStarted is the ts (ms) of the last lab.session.started of id.
func (st *labStore) sessionStarted(id string) (int64, bool, error) {
	ts, ok := unstored(st, func(b *labBatch) map[string]int64 { return b.sessions }, id)
	if ok || !lsKeyOK(id) {
		return ts, ok, nil
	}
	err := st.view(func(tx *bolt.Tx) error {
		v, err := lsGet(tx.Bucket(lsSessions), []byte(id))
		if err != nil || v == nil {
			return err
		}
		if len(v) != 8 {
			return fmt.Errorf("%w: session %q", errLabStoreCorrupt, id)
		}
		ts, ok = int64(binary.BigEndian.Uint64(v)), true
		return nil
	})
	return ts, ok, err
}

// counts is how many runs and experiments the store holds (after sync).
func (st *labStore) counts() (runs, exps int, err error) {
	if err := st.sync(); err != nil {
		return 0, 0, err
	}
	err = st.view(func(tx *bolt.Tx) error {
		c, err := readCounters(tx.Bucket(lsMeta))
		runs, exps = int(c.Runs), int(c.Exps)
		return err
	})
	return runs, exps, err
}

// indexKey is the index key of the run (or experiment) id: its place in
// the lists (nil when the store has no such record).
func (st *labStore) indexKey(ids []byte, id string) ([]byte, error) {
	if !lsKeyOK(id) {
		return nil, nil
	}
	var k []byte
	err := st.view(func(tx *bolt.Tx) error {
		v, err := lsGet(tx.Bucket(ids), []byte(id))
		k = bytes.Clone(v)
		return err
	})
	return k, err
}

// eachRecord calls fn for the records of idx (lsRunIdx or lsExpIdx) in
// key order (desc: newest first) after the key from (nil: from the
// start), until fn returns false. It reads labListChunk records per read
// transaction and calls fn outside it, so a slow reader never holds the
// file; it writes what is pending first.
func eachRecord[T any](st *labStore, idx []byte, desc bool, from []byte, fn func(k []byte, rec *T) bool) error {
	if err := st.sync(); err != nil {
		return err
	}
	type item struct {
		k   []byte
		rec T
	}
	from = bytes.Clone(from)
	read := 0
	defer func() {
		if read > labTrimAfter {
			st.trim() // a long list read many pages
		}
	}()
	for {
		var chunk []item
		err := st.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(idx).Cursor()
			var k, v []byte
			switch {
			case from == nil && desc:
				k, v = c.Last()
			case from == nil:
				k, v = c.First()
			case desc:
				k, v = c.Seek(from)
				if k == nil {
					k, v = c.Last()
				}
				for k != nil && bytes.Compare(k, from) >= 0 {
					k, v = c.Prev()
				}
			default:
				k, v = c.Seek(from)
				if k != nil && bytes.Equal(k, from) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(chunk) < labListChunk; k, v = step(c, desc) {
				b, err := lsValue(k, v)
				if err != nil {
					return err
				}
				it := item{k: bytes.Clone(k)}
				if err := decodeRecord(b, &it.rec); err != nil {
					return fmt.Errorf("%w: %q: %v", errLabStoreCorrupt, k, err)
				}
				chunk = append(chunk, it)
			}
			return nil
		})
		if err != nil {
			return err
		}
		read += len(chunk)
		for i := range chunk {
			if !fn(chunk[i].k, &chunk[i].rec) {
				return nil
			}
		}
		if len(chunk) < labListChunk {
			return nil
		}
		from = chunk[len(chunk)-1].k
	}
}

func step(c *bolt.Cursor, desc bool) ([]byte, []byte) {
	if desc {
		return c.Prev()
	}
	return c.Next()
}

// eachExperimentByAppearance calls fn with the last record of every
// experiment in the order each first appeared in the log.
func (st *labStore) eachExperimentByAppearance(fn func(e *events.LabExperiment) bool) error {
	if err := st.sync(); err != nil {
		return err
	}
	var from []byte
	for {
		var chunk []events.LabExperiment
		err := st.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(lsExpOrd).Cursor()
			k, v := c.First()
			if from != nil {
				k, v = c.Seek(from)
				if k != nil && bytes.Equal(k, from) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(chunk) < labListChunk; k, v = c.Next() {
				id, err := lsValue(k, v)
				if err != nil {
					return err
				}
				var e events.LabExperiment
				found, err := getRecord(tx.Bucket(lsExps), tx.Bucket(lsExpIdx), string(id), &e)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("%w: experiment %q listed, not stored", errLabStoreCorrupt, id)
				}
				chunk = append(chunk, e)
				from = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range chunk {
			if !fn(&chunk[i]) {
				return nil
			}
		}
		if len(chunk) < labListChunk {
			return nil
		}
	}
}

package labapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/reqindex"
)

// The Lab store's file, state/labstore.db (a bbolt file, issue 26): the
// runs, experiments and sessions of the log, on disk, read per request.
//
//	meta      format, covered seq and id, counters (next orders, counts)
//	runs      runId → idxKey of its record in runIdx
//	runIdx    idxKey → the run (a record: labstore_record.go)
//	byReal    artifactsDirRealpath → runId of the newest import
//	exps      experimentId → idxKey in expIdx
//	expIdx    idxKey → the experiment's last record
//	expOrd    order (8 bytes) → experimentId: first appearance order
//	sessions  sessionId → started ts (8 bytes, ms)
//
// idxKey is createdAt (NUL escaped as 00 01) | 00 00 | order (8 bytes,
// big-endian): the key order is createdAt, then first appearance, so a
// cursor walking runIdx backwards lists newest first exactly as the
// in-memory model sorted (createdAt descending, later appearance first).
// Every value starts with the CRC-32 of its key, a 0 byte and the rest
// of the value: bbolt checks its pages, not the values in them.
//
// A file of another format (cmlab-labstore-1 held records encoded by the
// store, without a record head) is not read: it is rebuilt from the log.
const labStoreFormat = "cmlab-labstore-2"

var (
	lsMeta     = []byte("meta")
	lsRuns     = []byte("runs")
	lsRunIdx   = []byte("runIdx")
	lsByReal   = []byte("byReal")
	lsExps     = []byte("exps")
	lsExpIdx   = []byte("expIdx")
	lsExpOrd   = []byte("expOrd")
	lsSessions = []byte("sessions")

	lsBuckets = [][]byte{lsMeta, lsRuns, lsRunIdx, lsByReal, lsExps, lsExpIdx, lsExpOrd, lsSessions}

	lsKeyFormat    = []byte("format")
	lsKeyCovered   = []byte("covered")
	lsKeyCoveredID = []byte("covered_id")
	lsKeyCounters  = []byte("counters")
)

// errLabStoreCorrupt wraps a value of the store that fails its CRC or
// cannot be read.
var errLabStoreCorrupt = errors.New("labstore: corrupt entry")

func idxKey(createdAt string, order uint64) []byte {
	b := make([]byte, 0, len(createdAt)+10)
	for i := 0; i < len(createdAt); i++ {
		if c := createdAt[i]; c == 0 {
			b = append(b, 0, 1)
		} else {
			b = append(b, c)
		}
	}
	b = append(b, 0, 0)
	return binary.BigEndian.AppendUint64(b, order)
}

func orderOfKey(k []byte) uint64 {
	if len(k) < 10 {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

func lsCRC(key, v []byte) uint32 {
	h := crc32.NewIEEE()
	h.Write(key)
	h.Write([]byte{0})
	h.Write(v)
	return h.Sum32()
}

// lsPut stores v under k in b with its CRC.
func lsPut(b *bolt.Bucket, k, v []byte) error {
	out := make([]byte, 4, 4+len(v))
	binary.BigEndian.PutUint32(out, lsCRC(k, v))
	return b.Put(k, append(out, v...))
}

// lsValue checks a stored value's CRC and returns the value (nil, nil for
// an absent one). The bytes belong to the transaction.
func lsValue(k, stored []byte) ([]byte, error) {
	if stored == nil {
		return nil, nil
	}
	if len(stored) < 4 || binary.BigEndian.Uint32(stored) != lsCRC(k, stored[4:]) {
		return nil, fmt.Errorf("%w: %q fails its CRC", errLabStoreCorrupt, k)
	}
	return stored[4:], nil
}

func lsGet(b *bolt.Bucket, k []byte) ([]byte, error) { return lsValue(k, b.Get(k)) }

// lsPutRecord stores the record of op under k in b.
func lsPutRecord(b *bolt.Bucket, k []byte, op *labOp, rec any) error {
	v, err := lsRecordValue(k, op, rec)
	if err != nil {
		return err
	}
	return b.Put(k, v)
}

// lsRecordValue is the stored value of op's record under k: the CRC and
// the record (labstore_record.go), the body op carries from its event or
// rec (op's record, timestamps filled) encoded when it carries none, in
// one allocation.
func lsRecordValue(k []byte, op *labOp, rec any) ([]byte, error) {
	fill, body := op.fill, op.body
	if body == nil {
		var err error
		if body, err = events.Marshal(rec); err != nil {
			return nil, err
		}
		fill = 0
	}
	v := make([]byte, 4, 4+lsRecordHead+len(body))
	v = append(v, fill)
	v = binary.BigEndian.AppendUint64(v, uint64(op.ts))
	v = append(v, body...)
	binary.BigEndian.PutUint32(v, lsCRC(k, v[4:]))
	return v, nil
}

// lsCounters are the store's counters, kept in meta.
type lsCounters struct {
	NextRun, NextExp uint64 // the next first-appearance order
	Runs, Exps       uint64 // how many of each
}

func (c lsCounters) bytes() []byte {
	b := make([]byte, 0, 32)
	for _, v := range []uint64{c.NextRun, c.NextExp, c.Runs, c.Exps} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func readCounters(meta *bolt.Bucket) (lsCounters, error) {
	v, err := lsGet(meta, lsKeyCounters)
	if err != nil {
		return lsCounters{}, err
	}
	if len(v) != 32 {
		return lsCounters{}, fmt.Errorf("%w: counters", errLabStoreCorrupt)
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(v[i*8:]) }
	return lsCounters{NextRun: u(0), NextExp: u(1), Runs: u(2), Exps: u(3)}, nil
}

// lsWriter applies records to the store inside one write transaction.
type lsWriter struct {
	tx                                               *bolt.Tx
	meta, runs, runIdx, byReal, exps, expIdx, expOrd *bolt.Bucket
	sessions                                         *bolt.Bucket
	c                                                lsCounters
}

func newLSWriter(tx *bolt.Tx) (*lsWriter, error) {
	w := &lsWriter{tx: tx, meta: tx.Bucket(lsMeta), runs: tx.Bucket(lsRuns), runIdx: tx.Bucket(lsRunIdx),
		byReal: tx.Bucket(lsByReal), exps: tx.Bucket(lsExps), expIdx: tx.Bucket(lsExpIdx),
		expOrd: tx.Bucket(lsExpOrd), sessions: tx.Bucket(lsSessions)}
	if w.meta == nil || w.runs == nil || w.runIdx == nil || w.byReal == nil || w.exps == nil || w.expIdx == nil || w.expOrd == nil || w.sessions == nil {
		return nil, errors.New("labstore: buckets missing")
	}
	// The index buckets are appended to (createdAt and order grow): pages
	// split full, not half full.
	for _, b := range []*bolt.Bucket{w.runIdx, w.expIdx, w.expOrd} {
		b.FillPercent = 0.95
	}
	c, err := readCounters(w.meta)
	if err != nil {
		return nil, err
	}
	w.c = c
	return w, nil
}

// lsPutIndexed stores op's record rec, id, under its index key in idx
// (createdAt, then the record's first-appearance order) and that key
// under id in ids. A record stored before keeps its order and loses its
// old index entry (createdAt may have changed); a new one takes the next
// order (*next), is counted (*count) and isNew is true.
func lsPutIndexed(ids, idx *bolt.Bucket, id []byte, createdAt string, op *labOp, rec any, next, count *uint64) (order uint64, isNew bool, err error) {
	old, err := lsGet(ids, id)
	if err != nil {
		return 0, false, err
	}
	if old != nil {
		order = orderOfKey(old)
		if err := idx.Delete(old); err != nil {
			return 0, false, err
		}
	} else {
		order, isNew = *next, true
		*next++
		*count++
	}
	k := idxKey(createdAt, order)
	if err := lsPut(ids, id, k); err != nil {
		return 0, false, err
	}
	return order, isNew, lsPutRecord(idx, k, op, rec)
}

func (w *lsWriter) putRun(op *labOp) error {
	run := op.run
	id := []byte(run.RunID)
	if _, _, err := lsPutIndexed(w.runs, w.runIdx, id, run.CreatedAt, op, run, &w.c.NextRun, &w.c.Runs); err != nil {
		return err
	}
	if !lsKeyOK(run.ArtifactsDirRealpath) {
		return nil
	}
	return lsPut(w.byReal, []byte(run.ArtifactsDirRealpath), id)
}

// putExp also records a new experiment's first appearance (expOrd).
func (w *lsWriter) putExp(op *labOp) error {
	exp := op.exp
	id := []byte(exp.ExperimentID)
	order, isNew, err := lsPutIndexed(w.exps, w.expIdx, id, exp.CreatedAt, op, exp, &w.c.NextExp, &w.c.Exps)
	if err != nil || !isNew {
		return err
	}
	return lsPut(w.expOrd, binary.BigEndian.AppendUint64(nil, order), id)
}

func (w *lsWriter) putSession(id string, ts int64) error {
	return lsPut(w.sessions, []byte(id), binary.BigEndian.AppendUint64(nil, uint64(ts)))
}

// maxLSKey is the longest key written: bbolt refuses longer ones (and an
// empty one), which would fail the whole batch; such a record (no
// content-machine id or path is near it) is left out of the store.
const maxLSKey = 16 << 10

func lsKeyOK(ks ...string) bool {
	for _, k := range ks {
		if k == "" || len(k) > maxLSKey {
			return false
		}
	}
	return true
}

func (w *lsWriter) apply(op *labOp) error {
	switch {
	case op.run != nil && !lsKeyOK(op.run.RunID, op.run.CreatedAt+"x"):
		return nil
	case op.exp != nil && !lsKeyOK(op.exp.ExperimentID, op.exp.CreatedAt+"x"):
		return nil
	case op.run == nil && op.exp == nil && !lsKeyOK(op.session):
		return nil
	case op.run != nil:
		return w.putRun(op)
	case op.exp != nil:
		return w.putExp(op)
	default:
		return w.putSession(op.session, op.ts)
	}
}

// finish stores the counters and the covered seq.
func (w *lsWriter) finish(seq uint64, id string) error {
	if err := lsPut(w.meta, lsKeyCounters, w.c.bytes()); err != nil {
		return err
	}
	if err := lsPut(w.meta, lsKeyCovered, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return err
	}
	return lsPut(w.meta, lsKeyCoveredID, []byte(id))
}

// labOp is one change of the store: a run, an experiment's last record or
// a session's start, as the event that made it, timestamps filled.
type labOp struct {
	run     *events.LabRun
	exp     *events.LabExperiment
	session string
	ts      int64 // the event's
	// body is the record as the event carries it (msgpack, timestamps
	// not filled; shares the event's Data) and fill the timestamps a read
	// fills from ts (labstore_record.go); nil: run or exp is encoded.
	body []byte
	fill byte
}

// labOpOf is the change ev makes (nil: none). Timestamps a producer left
// empty are filled from the event's ts exactly as the projector does, so
// the API and the JSONL views agree. The payload is read by the
// projector's fast decoder (a reflective decode where it gives up), and
// the record's bytes are taken from it as they are (labOp.body).
func labOpOf(ev *events.Event) *labOp {
	var key string // the record's key in the payload
	switch ev.Type {
	case events.TypeRunImported:
		key = "run"
	case events.TypeExperimentCreated, events.TypeExperimentSubmitted, events.TypeExperimentUpdated:
		key = "experiment"
	case events.TypeLabSessionStarted, events.TypeRunAdopted, events.TypeExperimentAdopted:
	default:
		return nil
	}
	p, err := projections.DecodePayload(ev)
	if err != nil {
		return nil // verify reports it; the read model skips what it cannot read
	}
	op := &labOp{ts: ev.TS}
	if info, ok := events.Lookup(ev.Type); key != "" && ok && ev.V == info.Version {
		// Not upcast: the payload's bytes are the record's.
		op.body, _ = events.MapValue(ev.Data, key)
	}
	exp := func(e events.LabExperiment, update bool) *labOp {
		op.fill = lsFillCreated
		if e.CreatedAt == "" {
			e.CreatedAt = ev.ISOTime()
		}
		if update {
			op.fill |= lsFillUpdated
			if e.UpdatedAt == "" {
				e.UpdatedAt = ev.ISOTime()
			}
		}
		op.exp = &e
		return op
	}
	putRun := func(run events.LabRun) *labOp {
		op.fill = lsFillCreated
		if run.CreatedAt == "" {
			run.CreatedAt = ev.ISOTime()
		}
		op.run = &run
		return op
	}
	switch p := p.(type) {
	case *events.RunImported:
		return putRun(p.Run)
	case *events.RunAdopted:
		// A content-machine home's line (engine/adopt.go): as they wrote it.
		if run, err := events.ParseRun(p.Raw); err == nil {
			return putRun(run)
		}
	case *events.ExperimentAdopted:
		if x, err := events.ParseExperiment(p.Raw); err == nil {
			return exp(x, false)
		}
	case *events.ExperimentCreated:
		return exp(p.Experiment, false)
	case *events.ExperimentSubmitted:
		return exp(p.Experiment, true)
	case *events.ExperimentUpdated:
		return exp(p.Experiment, true)
	case *events.LabSessionStarted:
		return &labOp{session: p.SessionID, ts: ev.TS}
	}
	return nil
}

// labBoltOptions: as the request-id index's (a synced freelist, so a
// damaged one is read in the opening goroutine, where a panic is
// recovered).
// A read-only open (LabStoreCovers) does not wait for a lock a daemon
// holds: it fails at once.
// The initial map of a store built from the log (createLabStore).
const (
	labMmapPerEvent = 256
	labMmapMin      = 32 << 20
	labMmapMax      = 1 << 30
)

func labBoltOptions(readOnly bool) *bolt.Options {
	if readOnly {
		return &bolt.Options{Timeout: time.Millisecond, ReadOnly: true}
	}
	return &bolt.Options{Timeout: 2 * time.Second}
}

// createLabStore removes any file at path and makes an empty store there,
// to be built from events events of the log.
//
// A store built from a long log maps at once the size it will about
// reach (labMmapPerEvent a event, at most labMmapMax): bbolt remaps the
// file each time it outgrows its map, doubling it, and after each remap
// every page the build touches faults in again and the open transaction
// copies its keys and values out of the old map — a tenth of the build's
// CPU time at 100,000 events (BenchmarkLabStoreBuild). The map is address
// space, not memory. A short log's store starts small, as bbolt sizes it.
func createLabStore(path string, events uint64) (*bolt.DB, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("labstore: %w", err)
	}
	o := labBoltOptions(false)
	if size := events * labMmapPerEvent; size >= labMmapMin {
		o.InitialMmapSize = int(min(size, labMmapMax))
	}
	db, err := bolt.Open(path, 0o600, o)
	if err != nil {
		return nil, fmt.Errorf("labstore: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range lsBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(lsMeta)
		if err := lsPut(meta, lsKeyFormat, []byte(labStoreFormat)); err != nil {
			return err
		}
		w, err := newLSWriterFresh(tx)
		if err != nil {
			return err
		}
		return w.finish(0, "")
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("labstore: %w", err)
	}
	return db, nil
}

func newLSWriterFresh(tx *bolt.Tx) (*lsWriter, error) {
	if err := lsPut(tx.Bucket(lsMeta), lsKeyCounters, lsCounters{}.bytes()); err != nil {
		return nil, err
	}
	return newLSWriter(tx)
}

// openLabStoreFile opens the store at path and reads what it covers; any
// doubt is an error (the caller rebuilds). A panic of bbolt reading a
// damaged file is an error.
func openLabStoreFile(path string, readOnly bool) (db *bolt.DB, covered uint64, coveredID string, err error) {
	db, err = reqindex.OpenFile(path, "store", labBoltOptions(readOnly), func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error {
			for _, b := range lsBuckets {
				if tx.Bucket(b) == nil {
					return fmt.Errorf("bucket %s missing", b)
				}
			}
			meta := tx.Bucket(lsMeta)
			f, err := lsGet(meta, lsKeyFormat)
			if err != nil {
				return err
			}
			if string(f) != labStoreFormat {
				return fmt.Errorf("format %q, want %q", f, labStoreFormat)
			}
			if _, err := readCounters(meta); err != nil {
				return err
			}
			c, err := lsGet(meta, lsKeyCovered)
			if err != nil {
				return err
			}
			if len(c) != 8 {
				return errors.New("covered seq missing")
			}
			covered = binary.BigEndian.Uint64(c)
			id, err := lsGet(meta, lsKeyCoveredID)
			if err != nil {
				return err
			}
			coveredID = string(id)
			return nil
		})
	})
	return db, covered, coveredID, err
}

// checkLabStore runs bbolt's page check and every value's CRC over db:
// O(records). A panic of bbolt reading a damaged page is an error.
func checkLabStore(db *bolt.DB) error {
	return reqindex.CheckFile(db, func(tx *bolt.Tx) error {
		for _, name := range lsBuckets {
			b := tx.Bucket(name)
			if b == nil {
				return fmt.Errorf("bucket %s missing", name)
			}
			if err := b.ForEach(func(k, v []byte) error {
				_, err := lsValue(k, v)
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

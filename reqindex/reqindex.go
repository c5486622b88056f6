package reqindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// Format is the value of the format key; a file with another is rebuilt.
const Format = "cmlab-reqindex-1"

// Defaults of Options.
const (
	DefaultFlushInterval = time.Second
	DefaultFlushAt       = 1024
	DefaultMaxPending    = 16384
	catchUpBatch         = 8192
)

// Errors of the index.
var (
	// ErrClosed is returned by Lookup after Close.
	ErrClosed = errors.New("reqindex: closed")
	// ErrCorrupt wraps a stored entry that fails its CRC or cannot be read.
	ErrCorrupt = errors.New("reqindex: corrupt entry")
)

var (
	bucketMeta    = []byte("meta")
	bucketEntries = []byte("req")
	keyFormat     = []byte("format")
	keyCovered    = []byte("covered")
	keyCoveredID  = []byte("covered_id")
)

// Record is what a request id maps to.
type Record struct {
	Hash string
	Resp []byte
}

// Options configure Open.
type Options struct {
	// Path of the bbolt file (home.Home.RequestIndexFile).
	Path string
	// Log is the home's open log, the source the index is a projection of.
	Log *wal.Log
	// Rebuild discards the file and rebuilds it from the log.
	Rebuild bool
	// NoSync skips fsync of the file (benchmarks only).
	NoSync bool
	// FlushInterval, FlushAt and MaxPending: see the package doc.
	FlushInterval time.Duration
	FlushAt       int
	MaxPending    int
	// VerifyAfterOpen makes Open's cost independent of the number of ids:
	// Open checks the format and the covered seq only, and a goroutine
	// that StartVerification starts runs the page check and every entry's
	// CRC, rebuilding the file from the log in place if they fail (see the
	// package doc). Until it has passed nothing is flushed: the caller
	// must call StartVerification soon (past MaxPending ids Observe waits).
	// Verified reports the outcome.
	VerifyAfterOpen bool
}

// Index is an open request-id index. Safe for concurrent use.
type Index struct {
	opts Options
	db   *bolt.DB // replaced only by the verification, under mu and dbMu with no flush writing
	// dbMu lets Lookup read db without mu (which Observe, on the log's
	// acknowledgement path, takes): held for reading across a lookup's
	// read transaction, for writing where db is replaced or closed.
	dbMu     sync.RWMutex
	dbClosed bool // under dbMu
	// inLookup, when set (tests), runs inside each lookup's read
	// transaction of the file.
	inLookup func()
	rebuilt  string // guarded by mu once Open has returned

	verified  chan struct{} // closed when the verification after open ends
	verifyErr error         // its outcome, set before verified is closed
	verifyGo  sync.Once     // starts the verification, or ends it unstarted at Close

	mu         sync.Mutex
	drained    *sync.Cond // signalled after each flush
	pending    map[string]Record
	flushing   map[string]Record
	observed   uint64 // last seq fed to Observe (or caught up at Open)
	observedID string
	covered    uint64 // seq durable in the file
	flushErr   error
	closed     bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Open opens (or rebuilds) the index at opts.Path and brings it up to the
// log's last seq. Rebuilt reports why the file was not trusted, if it was not.
func Open(ctx context.Context, opts Options) (*Index, error) {
	if opts.Log == nil || opts.Path == "" {
		return nil, errors.New("reqindex: Options.Path and Options.Log are required")
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.FlushAt <= 0 {
		opts.FlushAt = DefaultFlushAt
	}
	if opts.MaxPending < opts.FlushAt {
		opts.MaxPending = max(DefaultMaxPending, opts.FlushAt)
	}
	x := &Index{opts: opts, pending: map[string]Record{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), verified: make(chan struct{})}
	x.drained = sync.NewCond(&x.mu)
	reason := "rebuild requested"
	if !opts.Rebuild {
		db, covered, coveredID, err := x.openTrusted()
		if err == nil {
			x.db, x.covered, x.observed, x.observedID = db, covered, covered, coveredID
		} else if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("reqindex: %s is locked by another process: %w", opts.Path, err)
		} else {
			reason = err.Error()
		}
	}
	if x.db == nil {
		if err := x.create(); err != nil {
			return nil, err
		}
		if _, statErr := os.Stat(opts.Path); statErr == nil || opts.Rebuild {
			x.rebuilt = reason
		}
	}
	if err := x.catchUp(ctx); err != nil {
		x.db.Close()
		return nil, err
	}
	if !opts.VerifyAfterOpen || x.rebuilt != "" {
		x.verifyGo.Do(func() { close(x.verified) }) // nothing to verify
	}
	go x.flushLoop()
	return x, nil
}

// Rebuilt is why the existing file was discarded, at Open or by the
// verification after it ("" when it was trusted or there was none).
func (x *Index) Rebuilt() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.rebuilt
}

// boltOptions: the freelist is synced, so that opening a damaged file reads
// it in this goroutine (a panic there is recovered), not in one bbolt
// starts to rebuild it (NoFreelistSync), where a panic ends the process.
func (x *Index) boltOptions() *bolt.Options {
	return &bolt.Options{Timeout: 2 * time.Second, NoSync: x.opts.NoSync}
}

// openTrusted opens the file and checks it is one this code wrote for this
// log; any doubt is an error (and the caller rebuilds).
func (x *Index) openTrusted() (db *bolt.DB, covered uint64, coveredID string, err error) {
	db, err = OpenFile(x.opts.Path, "index", x.boltOptions(), func(db *bolt.DB) error {
		if !x.opts.VerifyAfterOpen {
			if err := checkAll(db); err != nil {
				return err
			}
		}
		return db.View(func(tx *bolt.Tx) error {
			meta, entries := tx.Bucket(bucketMeta), tx.Bucket(bucketEntries)
			if meta == nil || entries == nil {
				return errors.New("buckets missing")
			}
			if f := meta.Get(keyFormat); string(f) != Format {
				return fmt.Errorf("format %q, want %q", f, Format)
			}
			c := meta.Get(keyCovered)
			if len(c) != 8 {
				return errors.New("covered seq missing")
			}
			covered = binary.BigEndian.Uint64(c)
			coveredID = string(meta.Get(keyCoveredID))
			return nil
		})
	})
	if err != nil {
		return nil, 0, "", err
	}
	if err := CheckCovered(x.opts.Log, covered, coveredID, "index"); err != nil {
		db.Close()
		return nil, 0, "", err
	}
	return db, covered, coveredID, nil
}

// checkAll runs bbolt's page check and every entry's CRC over db: O(ids).
// A panic of bbolt reading a damaged page is an error.
func checkAll(db *bolt.DB) error {
	return CheckFile(db, func(tx *bolt.Tx) error {
		entries := tx.Bucket(bucketEntries)
		if entries == nil {
			return errors.New("buckets missing")
		}
		// Every entry's CRC: bbolt checks its pages, not the values in them.
		return entries.ForEach(func(k, v []byte) error {
			_, err := decode(string(k), v)
			return err
		})
	})
}

// create removes any file and starts an empty index covering nothing.
func (x *Index) create() error {
	db, err := createAt(x.opts.Path, x.boltOptions())
	if err != nil {
		return err
	}
	x.db = db
	x.covered, x.observed, x.observedID = 0, 0, ""
	return nil
}

// createAt removes any file at path and makes an empty index there.
func createAt(path string, o *bolt.Options) (*bolt.DB, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reqindex: %w", err)
	}
	db, err := bolt.Open(path, 0o600, o)
	if err != nil {
		return nil, fmt.Errorf("reqindex: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketEntries); err != nil {
			return err
		}
		if err := meta.Put(keyFormat, []byte(Format)); err != nil {
			return err
		}
		return putCovered(meta, 0, "")
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("reqindex: %w", err)
	}
	return db, nil
}

func putCovered(meta *bolt.Bucket, seq uint64, id string) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	if err := meta.Put(keyCovered, b[:]); err != nil {
		return err
	}
	return meta.Put(keyCoveredID, []byte(id))
}

// catchUp writes the log's events after the covered seq to the file, one
// transaction (entries + covered seq) per batch.
func (x *Index) catchUp(ctx context.Context) error {
	// From covered+1 even before the log's first retained seq: the log
	// reads archived segments back, and fails (wal.ErrCompacted, naming
	// the fix) rather than leave ids out.
	return x.file().CatchUp(ctx, x.db, x.covered+1, x.opts.Log.LastSeq(), func(seq uint64, id string) {
		x.covered, x.observed, x.observedID = seq, seq, id
	})
}

// file is the index as a derived file of the log (derived.go).
func (x *Index) file() *DerivedFile {
	return &DerivedFile{Name: "reqindex", Log: x.opts.Log, Batch: catchUpBatch, NoSync: x.opts.NoSync,
		NewBatch: func() Batch { return entryBatch{} },
		Create:   func(path string) (*bolt.DB, error) { return createAt(path, x.boltOptions()) }}
}

// entryBatch is the ids of a run of events not yet written (the first
// event of an id wins).
type entryBatch map[string]Record

func (b entryBatch) Add(ev *events.Event) {
	if ev.Req != "" {
		if _, ok := b[ev.Req]; !ok {
			b[ev.Req] = Record{Hash: ev.ReqHash, Resp: ev.Resp}
		}
	}
}

func (b entryBatch) Write(db *bolt.DB, seq uint64, id string) error { return writeTo(db, b, seq, id) }

func (b entryBatch) Reset() { clear(b) }

// write stores entries (first writer of an id wins) and the covered seq in
// one transaction.
func (x *Index) write(entries map[string]Record, seq uint64, id string) error {
	return writeTo(x.db, entries, seq, id)
}

func writeTo(db *bolt.DB, entries map[string]Record, seq uint64, id string) error {
	err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEntries)
		for k, r := range entries {
			if b.Get([]byte(k)) != nil {
				continue
			}
			if err := b.Put([]byte(k), encode(k, r)); err != nil {
				return err
			}
		}
		return putCovered(tx.Bucket(bucketMeta), seq, id)
	})
	if err != nil {
		return fmt.Errorf("reqindex: write: %w", err)
	}
	return nil
}

// encode is crc32(key|value) | uvarint(len hash) | hash | resp.
func encode(key string, r Record) []byte {
	b := make([]byte, 4, 4+binary.MaxVarintLen64+len(r.Hash)+len(r.Resp))
	b = binary.AppendUvarint(b, uint64(len(r.Hash)))
	b = append(b, r.Hash...)
	b = append(b, r.Resp...)
	binary.BigEndian.PutUint32(b, entryCRC(key, b[4:]))
	return b
}

func entryCRC(key string, v []byte) uint32 {
	h := crc32.NewIEEE()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(v)
	return h.Sum32()
}

func decode(key string, b []byte) (Record, error) {
	if len(b) < 5 || binary.BigEndian.Uint32(b) != entryCRC(key, b[4:]) {
		return Record{}, fmt.Errorf("%w: %q fails its CRC", ErrCorrupt, key)
	}
	n, k := binary.Uvarint(b[4:])
	if k <= 0 || uint64(len(b)-4-k) < n {
		return Record{}, fmt.Errorf("%w: %q", ErrCorrupt, key)
	}
	rest := b[4+k:]
	return Record{Hash: string(rest[:n]), Resp: append([]byte(nil), rest[n:]...)}, nil
}

// Covered is the seq the index is caught up to: an engine subscribing it
// feeds only the events after it.
func (x *Index) Covered() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.observed
}

// Observe records the request ev carries. It is called in log order; an
// event at or below the seq already covered is ignored.
func (x *Index) Observe(ev *events.Event) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ev.Seq != 0 && ev.Seq <= x.observed {
		return
	}
	if ev.Seq != 0 {
		x.observed, x.observedID = ev.Seq, ev.ID
	}
	if ev.Req == "" {
		return
	}
	if _, ok := x.pending[ev.Req]; ok {
		return
	}
	if _, ok := x.flushing[ev.Req]; ok {
		return
	}
	x.pending[ev.Req] = Record{Hash: ev.ReqHash, Resp: ev.Resp}
	if len(x.pending) >= x.opts.FlushAt {
		select {
		case x.kick <- struct{}{}:
		default:
		}
	}
	// Back-pressure: the heap holds at most MaxPending unflushed ids,
	// unless the file cannot be written (then the log still has them).
	for len(x.pending) >= x.opts.MaxPending && x.flushErr == nil && !x.closed {
		select {
		case x.kick <- struct{}{}:
		default:
		}
		x.drained.Wait()
	}
}

// Lookup returns the record of req. An error (a damaged entry) must be
// treated as "unknown, do not act".
//
// Memory is read first, then the file, and an id found in both has the
// file's record (it is the older). Ids only move from memory to the file
// (a flush holds them in flushing until they are written), and the file
// only gains ids, so an id held anywhere before the lookup began is found.
// The file is read without mu: Observe, which takes mu on the log's
// acknowledgement path, does not wait for a lookup's read transaction.
func (x *Index) Lookup(req string) (rec Record, ok bool, err error) {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return Record{}, false, ErrClosed
	}
	mem, inMem := x.flushing[req]
	if !inMem {
		mem, inMem = x.pending[req]
	}
	x.mu.Unlock()
	x.dbMu.RLock()
	defer x.dbMu.RUnlock()
	if x.dbClosed {
		return Record{}, false, ErrClosed
	}
	err = x.db.View(func(tx *bolt.Tx) (err error) {
		if x.inLookup != nil {
			x.inLookup()
		}
		defer faultsPanic()()
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: bbolt panicked: %v", ErrCorrupt, p)
			}
		}()
		v := tx.Bucket(bucketEntries).Get([]byte(req))
		if v == nil {
			return nil
		}
		rec, err = decode(req, v)
		ok = err == nil
		return err
	})
	if err != nil || ok {
		return rec, ok, err
	}
	return mem, inMem, nil
}

// Pending is the number of ids held in memory, not yet on disk.
func (x *Index) Pending() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.pending) + len(x.flushing)
}

// Len is the number of ids stored on disk.
func (x *Index) Len() (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return 0, ErrClosed
	}
	n := 0
	err := x.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketEntries).Stats().KeyN
		return nil
	})
	return n, err
}

// Flush writes the pending ids and the observed seq to disk now (after
// the verification after open, if one runs).
func (x *Index) Flush() error {
	select {
	case <-x.verified:
	case <-x.stop:
	}
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	x.mu.Unlock()
	return x.flush()
}

func (x *Index) flush() error {
	x.mu.Lock()
	for x.flushing != nil { // another flush is writing
		x.drained.Wait()
	}
	if len(x.pending) == 0 && x.observed == x.covered {
		x.mu.Unlock()
		return nil
	}
	x.flushing, x.pending = x.pending, map[string]Record{}
	seq, id := x.observed, x.observedID
	x.mu.Unlock()

	err := x.write(x.flushing, seq, id)

	x.mu.Lock()
	if err != nil {
		for k, r := range x.flushing { // older than any pending one
			x.pending[k] = r
		}
	} else {
		x.covered = seq
	}
	x.flushing = nil
	x.flushErr = err
	x.drained.Broadcast()
	x.mu.Unlock()
	return err
}

// Err is the error of the last failed flush, nil once one succeeds.
func (x *Index) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.flushErr
}

func (x *Index) flushLoop() {
	defer close(x.done)
	// Nothing is written to a file not yet verified (Options.VerifyAfterOpen):
	// bbolt writing over a damaged page could panic. Meanwhile ids stay
	// pending (Observe waits past MaxPending).
	select {
	case <-x.verified:
	case <-x.stop:
		return
	}
	t := time.NewTicker(x.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
		case <-x.kick:
		}
		x.flush() // a failure is kept in Err and retried next time
	}
}

// Close flushes what is pending and closes the file.
func (x *Index) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.mu.Unlock()
	close(x.stop)
	<-x.done
	x.verifyGo.Do(func() { x.verifyErr = ErrClosed; close(x.verified) })
	<-x.verified
	err := x.flush()
	x.mu.Lock()
	x.closed = true
	x.drained.Broadcast()
	x.mu.Unlock()
	x.dbMu.Lock()
	x.dbClosed = true
	cerr := x.db.Close()
	x.dbMu.Unlock()
	if err == nil {
		err = cerr
	}
	return err
}

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
	db   *bolt.DB // replaced only by the verification's rebuild (live.Install), with no flush writing
	// dbMu lets Lookup read db without the live file's lock (which
	// Observe, on the log's acknowledgement path, takes): held for
	// reading across a lookup's read transaction, for writing where db
	// is replaced or closed.
	dbMu     sync.RWMutex
	dbClosed bool // under dbMu
	// inLookup, when set (tests), runs inside each lookup's read
	// transaction of the file.
	inLookup func()

	// live holds the ids observed and not yet on disk, flushes them, and
	// runs the verification after open (live.go).
	live *Live[entryBatch]
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
	x := &Index{opts: opts}
	trust := x.openTrusted
	if opts.Rebuild {
		trust = nil
	}
	f, err := x.file().Open(ctx, opts.Path, "index", trust)
	if err != nil {
		return nil, err
	}
	x.db = f.DB
	rebuilt := ""
	if f.Made {
		rebuilt = f.Why
	}
	x.live = StartLive(LiveOptions[entryBatch]{File: x.file(), Path: opts.Path,
		FlushInterval: opts.FlushInterval, FlushAt: opts.FlushAt, MaxPending: opts.MaxPending,
		NewPending: func() entryBatch { return entryBatch{} },
		Write:      func(b entryBatch, seq uint64, id string) error { return writeTo(x.db, b, seq, id) },
		Install:    x.install, CloseFile: x.closeFile, ErrClosed: ErrClosed,
		// Nothing is written to a file not yet verified: bbolt writing
		// over a damaged page could panic. Meanwhile ids stay pending
		// (Observe waits past MaxPending).
		WriteAfterCheck: true,
	}, f.Covered, f.CoveredID, rebuilt)
	if !opts.VerifyAfterOpen || f.Made {
		x.live.NoVerification() // nothing to verify
	}
	return x, nil
}

// Rebuilt is why the existing file was discarded, at Open or by the
// verification after it ("" when it was trusted or there was none).
func (x *Index) Rebuilt() string { return x.live.State().Rebuilt }

// boltOptions: the freelist is synced, so that opening a damaged file reads
// it in this goroutine (a panic there is recovered), not in one bbolt
// starts to rebuild it (NoFreelistSync), where a panic ends the process.
func (x *Index) boltOptions() *bolt.Options {
	return &bolt.Options{Timeout: 2 * time.Second, NoSync: x.opts.NoSync}
}

// openTrusted opens the file and checks it is one this code wrote; any
// doubt is an error (and the caller rebuilds). DerivedFile.Open checks
// that it is of this log.
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
	return db, covered, coveredID, err
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

func (b entryBatch) Len() int { return len(b) }

// Before puts b's ids into newer: an id in both keeps b's (the first
// writer of an id wins).
func (b entryBatch) Before(newer entryBatch) entryBatch {
	for k, r := range b {
		newer[k] = r
	}
	return newer
}

// writeTo stores entries (first writer of an id wins) and the covered seq
// in one transaction.
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
func (x *Index) Covered() uint64 { return x.live.State().Observed }

// Observe records the request ev carries. It is called in log order; an
// event at or below the seq already covered is ignored.
func (x *Index) Observe(ev *events.Event) {
	x.live.Observe(ev, func(pending, flushing entryBatch) bool {
		if ev.Req == "" {
			return false
		}
		if _, ok := pending[ev.Req]; ok {
			return false
		}
		if _, ok := flushing[ev.Req]; ok {
			return false
		}
		pending[ev.Req] = Record{Hash: ev.ReqHash, Resp: ev.Resp}
		return true
	})
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
	var mem Record
	var inMem bool
	if x.live.Unstored(func(b entryBatch) bool { mem, inMem = b[req]; return inMem }) {
		return Record{}, false, ErrClosed
	}
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
func (x *Index) Pending() int { return x.live.State().Unflushed }

// Len is the number of ids stored on disk.
func (x *Index) Len() (int, error) {
	if x.live.State().Closed {
		return 0, ErrClosed
	}
	x.dbMu.RLock()
	defer x.dbMu.RUnlock()
	if x.dbClosed {
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
func (x *Index) Flush() error { return x.live.Flush() }

// Err is the error of the last failed flush, nil once one succeeds.
func (x *Index) Err() error { return x.live.State().Err }

// Close flushes what is pending and closes the file.
func (x *Index) Close() error { return x.live.Close() }

// install puts the verification's rebuilt file in place of db.
func (x *Index) install(db *bolt.DB) {
	old := x.db
	x.dbMu.Lock()
	x.db = db
	x.dbMu.Unlock()
	old.Close()
}

// closeFile closes db at Close, after the last flush.
func (x *Index) closeFile() error {
	x.dbMu.Lock()
	defer x.dbMu.Unlock()
	x.dbClosed = true
	return x.db.Close()
}

package reqindex

import (
	"context"
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// DerivedFile is how a derived bbolt file of a home (this index; the Lab
// store of package labapi) is written from the log: every transaction
// stores the changes of a run of events together with the seq (and id)
// of the last of them, so the file may lag the log but never claims an
// event it does not hold. The file's own part is its Batch (what an event
// changes, and how the changes are written), Create (an empty file) and
// the check it passes to Open; the open, the catch-up loop and the
// rebuild beside a serving file are here, once (and the live side, once
// open, in Live).
type DerivedFile struct {
	// Name prefixes errors ("reqindex", "labstore").
	Name string
	// Log is the home's open log.
	Log *wal.Log
	// Batch is the number of events per transaction of a catch-up.
	Batch int
	// NewBatch makes an empty batch of changes.
	NewBatch func() Batch
	// Create removes any file at path and makes an empty one covering
	// nothing.
	Create func(path string) (*bolt.DB, error)
	// SyncOnce commits a catch-up's transactions without fsync (nor the
	// fsync bbolt makes when the file grows) and syncs the file once at
	// its end. A SIGKILL meanwhile leaves the last committed transaction,
	// records and covered seq together, which the next open resumes
	// from; a power loss may tear pages written since the last sync,
	// which the file's check (pages and every value's CRC) finds, and the
	// file is rebuilt. Otherwise every transaction is fsynced (unless
	// NoSync).
	SyncOnce bool
	// NoSync skips the directory fsync of a rebuild's rename (benchmarks).
	NoSync bool
	// FS is the file system of a rebuild's rename and directory fsync
	// (nil: the OS); tests fail them through it.
	FS home.FS
	// Hook, if not nil, is called at each Phase* (crash tests stop there).
	Hook func(phase string)
}

// The phases of a write of a derived file that Hook is called at.
const (
	PhaseCreated        = "created"         // Open made an empty file, nothing caught up
	PhaseCatchUp        = "catch-up"        // a catch-up batch of Open committed, more to come
	PhaseCaughtUp       = "caught-up"       // a SyncOnce catch-up's last batch committed, the file not yet synced
	PhaseRebuildBuilt   = "rebuild-built"   // a rebuild's new file whole, not renamed
	PhaseRebuildRenamed = "rebuild-renamed" // renamed over the old file, not yet swapped in
)

func (d *DerivedFile) hook(phase string) {
	if d.Hook != nil {
		d.Hook(phase)
	}
}

// Opened is a derived file open for writing (Open), caught up with the
// log.
type Opened struct {
	DB *bolt.DB
	// Covered and CoveredID are the seq and id of the last event the file
	// holds.
	Covered   uint64
	CoveredID string
	// Made reports a new file made at the path, and Why the reason: why
	// the file there was not trusted, that there was none, or that a
	// rebuild was asked for. Found reports that a file was there.
	Made  bool
	Why   string
	Found bool
}

// Open opens the derived file at path (what names it in errors: "index",
// "store") if trust accepts it (trust opens it, with OpenFile, and reads
// its format and covered seq and id) and it claims no event the log does
// not hold (CheckCovered); on any doubt, or when trust is nil (a rebuild
// asked for), it removes the file and makes an empty one (Create). A file
// locked by another process is an error. The file is then caught up with
// the log's last seq, one transaction per Batch events.
func (d *DerivedFile) Open(ctx context.Context, path, what string, trust func() (*bolt.DB, uint64, string, error)) (Opened, error) {
	var o Opened
	why := "rebuild requested"
	if trust != nil {
		db, covered, coveredID, err := trust()
		if err == nil {
			if err = CheckCovered(d.Log, covered, coveredID, what); err != nil {
				db.Close()
			}
		}
		if errors.Is(err, bolt.ErrTimeout) {
			return Opened{}, fmt.Errorf("%s: %s is locked by another process: %w", d.Name, path, err)
		}
		if err == nil {
			o = Opened{DB: db, Covered: covered, CoveredID: coveredID}
		} else {
			why = err.Error()
		}
	}
	if o.DB == nil {
		_, serr := os.Stat(path)
		db, err := d.Create(path)
		if err != nil {
			return Opened{}, err
		}
		o = Opened{DB: db, Made: true, Why: why, Found: serr == nil}
		d.hook(PhaseCreated)
	}
	// From covered+1 even before the log's first retained seq: the log
	// reads archived segments back, and fails (wal.ErrCompacted, naming
	// the fix) rather than leave events out.
	err := d.CatchUp(ctx, o.DB, o.Covered+1, d.Log.LastSeq(), func(seq uint64, id string) {
		o.Covered, o.CoveredID = seq, id
		d.hook(PhaseCatchUp)
	})
	if err != nil {
		o.DB.Close()
		return Opened{}, err
	}
	return o, nil
}

// CheckCovered refuses a derived file (what: "index", "store") claiming
// an event the log does not hold: its covered seq past the log's end, or
// naming another event (by id) than the log's at that seq.
func CheckCovered(l *wal.Log, covered uint64, coveredID, what string) error {
	if last := l.LastSeq(); covered > last {
		return fmt.Errorf("covers seq %d, the log ends at %d", covered, last)
	}
	if covered > 0 && covered >= l.FirstSeq() {
		ev, err := l.Read(covered)
		if err != nil {
			return fmt.Errorf("covered seq %d: %w", covered, err)
		}
		if ev.ID != coveredID {
			return fmt.Errorf("covered seq %d is event %s in the log, %s in the %s", covered, ev.ID, coveredID, what)
		}
	}
	return nil
}

// Batch is the changes of a run of events not yet in the file.
type Batch interface {
	// Add takes the change ev makes, if any.
	Add(ev *events.Event)
	// Write stores the changes added since the last Reset and the covered
	// seq and id in one transaction of db.
	Write(db *bolt.DB, seq uint64, id string) error
	// Reset empties the batch for reuse.
	Reset()
}

// catchUpDepth is how many batches a catch-up holds: one filled from the
// log while the other is written, so that reading and decoding the log
// and writing the file use two cores.
const catchUpDepth = 2

// CatchUp writes the changes of the log's events from..last to db, one
// transaction per Batch events, calling done (in the caller's goroutine)
// after each. The log is read and the batches filled in a goroutine while
// the previous batch is written; CatchUp waits for it before returning.
// db must not be written by anything else meanwhile.
func (d *DerivedFile) CatchUp(ctx context.Context, db *bolt.DB, from, last uint64, done func(seq uint64, id string)) (err error) {
	if from > last {
		return nil
	}
	if d.SyncOnce && !db.NoSync {
		db.NoSync, db.NoGrowSync = true, true
		defer func() {
			db.NoSync, db.NoGrowSync = false, false
			if err == nil {
				d.hook(PhaseCaughtUp)
			}
			if serr := db.Sync(); err == nil && serr != nil {
				err = fmt.Errorf("%s: catch-up: %w", d.Name, serr)
			}
		}()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan Batch, catchUpDepth)
	for range catchUpDepth {
		free <- d.NewBatch()
	}
	filled := make(chan filledBatch)
	readErr := make(chan error, 1)
	go func() {
		defer close(filled)
		readErr <- d.fill(ctx, from, last, free, filled)
	}()
	var werr error
	for f := range filled {
		if werr == nil {
			if werr = f.b.Write(db, f.seq, f.id); werr == nil {
				done(f.seq, f.id)
			} else {
				cancel() // the reader stops; its batches are drained here
			}
		}
		f.b.Reset()
		free <- f.b // never blocks: at most catchUpDepth batches exist
	}
	if werr != nil {
		return werr
	}
	return <-readErr
}

// filledBatch is a batch ready to write and the last event it covers.
type filledBatch struct {
	b   Batch
	seq uint64
	id  string
}

// fill reads the log's events from..last into batches taken from free and
// hands each full one (and the last, partial one) to filled.
func (d *DerivedFile) fill(ctx context.Context, from, last uint64, free <-chan Batch, filled chan<- filledBatch) error {
	var b Batch
	var seq uint64
	var id string
	n := 0
	send := func() error {
		select {
		case filled <- filledBatch{b: b, seq: seq, id: id}:
			b, n = nil, 0
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for ev, err := range d.Log.Events(from) {
		if err != nil {
			return fmt.Errorf("%s: catch-up: %w", d.Name, err)
		}
		if ev.Seq > last {
			break
		}
		if b == nil {
			select {
			case b = <-free:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		b.Add(ev)
		seq, id = ev.Seq, ev.ID
		if n++; n >= d.Batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := send(); err != nil {
				return err
			}
		}
	}
	if b != nil {
		return send()
	}
	return ctx.Err()
}

// Rebuild is a new file being built from the log beside a serving one.
type Rebuild struct {
	d          *DerivedFile
	db         *bolt.DB
	tmp, path  string
	seq        uint64 // the last event written to db
	finishedOK bool
}

// StartRebuild makes a new file beside path (path + ".rebuild") and
// writes the log's events 1..upTo to it, while the file at path keeps
// serving. The owner then stops its own writes to the old file and calls
// Finish with the seq the old file covers by then, or Abort.
func (d *DerivedFile) StartRebuild(ctx context.Context, path string, upTo uint64) (*Rebuild, error) {
	tmp := path + ".rebuild"
	db, err := d.Create(tmp)
	if err != nil {
		return nil, err
	}
	r := &Rebuild{d: d, db: db, tmp: tmp, path: path}
	if err := d.CatchUp(ctx, db, 1, upTo, r.record); err != nil {
		r.Abort()
		return nil, err
	}
	return r, nil
}

func (r *Rebuild) record(seq uint64, _ string) { r.seq = seq }

// Finish writes the events the old file gained since StartRebuild
// (through covered: they are in the log) and renames the new file over
// the old one, returning the new file open. An error that comes with
// the file is the failed fsync of the directory: the file is in place,
// but the rename may not survive a crash (the next open checks whichever
// file it finds); the owner keeps it as its flush error. On any other
// error (no file) the new file is removed.
func (r *Rebuild) Finish(ctx context.Context, covered uint64) (*bolt.DB, error) {
	if err := r.d.CatchUp(ctx, r.db, r.seq+1, covered, r.record); err != nil {
		r.Abort()
		return nil, err
	}
	r.d.hook(PhaseRebuildBuilt)
	err := home.Install(r.d.FS, r.tmp, r.path, r.d.NoSync)
	var ds *home.DirSyncError
	if err != nil && !errors.As(err, &ds) {
		r.Abort()
		return nil, fmt.Errorf("%s: %w", r.d.Name, err)
	}
	if err != nil {
		err = fmt.Errorf("%s: fsync directory after rebuild: %w", r.d.Name, ds.Err)
	}
	r.finishedOK = true
	r.d.hook(PhaseRebuildRenamed)
	return r.db, err
}

// Abort closes and removes the new file (after StartRebuild's success,
// when the owner was closed meanwhile).
func (r *Rebuild) Abort() {
	if r.finishedOK {
		return
	}
	r.db.Close()
	os.Remove(r.tmp)
}

package wal

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	twal "github.com/tidwall/wal"
)

// Errors of the log's life cycle.
var (
	// ErrFailed wraps the cause once a write or fsync failed; the log must be reopened.
	ErrFailed = errors.New("wal: log failed")
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = errors.New("wal: log closed")
	// ErrLocked is returned when another process holds the log's LOCK.
	ErrLocked = errors.New("wal: log locked")
	// ErrNotFound is returned by Read for a sequence outside the log.
	ErrNotFound = errors.New("wal: not found")
	// ErrInvalidEvent is returned by Append for an event that lacks type,
	// version or id, whose envelope cannot be encoded, or that is passed
	// twice to one Append. Nothing is written.
	ErrInvalidEvent = errors.New("wal: invalid event")
)

// DefaultSegmentSize is the segment size of a log opened without one.
const DefaultSegmentSize = 4 << 20

// Options configure Open. The zero value of every field but Dir is a sane default.
type Options struct {
	// Dir is the log directory (home/wal). Required.
	Dir string
	// QuarantineDir receives bytes cut by tail repair. Default: the
	// directory "quarantine" beside Dir (home/quarantine).
	QuarantineDir string
	// SegmentSize is the target size of a segment file. Default
	// DefaultSegmentSize (4 MiB). tidwall/wal holds the tail segment in
	// memory; the log sizes that buffer for a whole segment ahead
	// (tailbuf.go), so the segment size no longer sets the length of
	// growth stalls, only the memory held (about two segments) and how
	// often tidwall's cycle (an fsync of the full segment inside a
	// WriteBatch) and a directory fsync come round.
	SegmentSize int
	// MaxBatch caps the events of one group commit (a single larger Append
	// still goes out as one group). Default 4096.
	MaxBatch int
	// NoSync skips every fsync (group commits, directory, tail repair)
	// and preallocation. Only for benchmarks of the non-durable path and
	// tests that do not test durability.
	NoSync bool
	// Preallocate is how many bytes of zeros the log writes ahead of the
	// data of its tail segment at a time, in the background, so that group
	// commits overwrite allocated blocks instead of growing the file (see
	// prealloc.go). Default 4 MiB; rounded down to a multiple of 1 MiB;
	// negative turns preallocation off. Segments smaller than 1 MiB are
	// never preallocated.
	Preallocate int
	// Apply is called by the committer with each group's events after they
	// are durable and before any appender is acknowledged. An error (or a
	// panic) puts the log into its failed state.
	Apply func(evs []*events.Event) error
	// Now is the clock for ts. Default time.Now.
	Now func() time.Time
	// Faults, when set, injects write and fsync failures (tests only).
	Faults *Faults
	// FS, when set, is the seam of the log's durable file writes (the
	// manifest, segments copied to an archive: home.WriteDurable); fault
	// and crash tests fail or block a stage of them. Default the real
	// file system.
	FS home.FS
	// Archive, when set, is where Events reads the sequences before the
	// first retained one (see Manifest) instead of the archive
	// directories wal/MANIFEST names.
	Archive string
	// AckTrace, when set, is called in the caller's goroutine at the end
	// of every successful Append with the decomposition of its latency.
	// For benchmarks (`cmlab bench wal`): it costs a few clock reads per
	// append and group. It must be safe for concurrent calls.
	AckTrace func(AckTiming)
	// VerifyAfterOpen makes Open read only the last segment (the one a
	// crash can tear) and the sealed segments wal/VERIFIED does not list
	// unchanged: the entries of the listed ones are checked by a goroutine
	// that StartVerification starts (see "Verification after open" in
	// doc.go). Damage found there fails the log with a
	// *CorruptError, as Open would have refused it. Verified reports the
	// outcome.
	VerifyAfterOpen bool
	// Acked is a seq the caller knows was acknowledged (the engine passes
	// the views' checkpoint; 0: unknown). Damage at the end of the log
	// before it is refused as corruption instead of cut as a torn tail,
	// and so is a log that ends before it (see acked.go).
	Acked uint64
	// AcceptTailLoss: the operator accepted the loss of the log's end (a
	// salvage marked the views stale): damage there is cut as a torn tail
	// whatever it holds, Acked notwithstanding.
	AcceptTailLoss bool
}

// Log is an open, writable log. It is safe for concurrent use.
type Log struct {
	opts  Options
	tw    *twal.Log
	tww   *twalWriter // the real writer under w, closed by Close
	w     Writer
	lock  *dirLock
	stats statsRecorder

	repaired *events.WalRepaired // the repair done by Open, if any

	mu        sync.Mutex // guards failed, first, last, changed
	failed    error
	hasFailed atomic.Bool // failed != nil, read without the lock by Append

	first   uint64
	last    uint64
	changed chan struct{} // closed and replaced whenever last grows

	sendMu sync.RWMutex // read-held while an Append queues; Close takes it to set closed
	closed bool
	queued atomic.Int64 // appends queued and not yet through write (a hint for the syncer)

	readMu sync.Mutex // tidwall's Read is not safe for concurrent readers

	compactMu sync.Mutex // one Compact at a time

	reqs   chan *appendReq
	done   chan struct{} // closed by Close
	exited chan struct{} // closed when the committer and the syncer have returned
	// closeDone is closed when the first Close has released the lock: a
	// concurrent Close waits for it, so that no Close returns while the
	// log is still open.
	closeDone chan struct{}

	// The committer writes groups and hands them to the syncer, which
	// fsyncs everything written so far in one call, applies and
	// acknowledges: the next group is written while the previous fsync runs.
	scratch [][]byte // the committer's entries of one WriteBatch

	// sealed: the segments before the last at Open, whose entries the
	// verification after open checks (Options.VerifyAfterOpen).
	sealed    []sealedSegment
	verified  chan struct{} // closed when that verification has ended
	verifyRep VerifyReport  // set before verified is closed
	verifyGo  sync.Once     // starts the verification, or ends it unstarted at Close

	pmu       sync.Mutex
	pending   []*written    // written, not yet fsynced, in sequence order
	pwake     chan struct{} // (cap 1) pending grew
	wroteLast chan struct{} // closed by the committer when it will write no more
}

// written is a group the committer has written but not fsynced.
type written struct {
	group  []*appendReq
	n      int // events
	bytes  int
	first  uint64
	cycled bool // the write created a segment file
	// sealStart, sealed, written: mono stamps, set with Options.AckTrace.
	sealStart, sealed, written int64
}

type appendReq struct {
	evs     []*events.Event
	entries [][]byte // encoded with seq 0 into buf; the committer patches seq and CRC
	buf     []byte
	resp    chan appendResp
	st      ackStamps // with Options.AckTrace
}

// appendResp answers an appendReq: its events got first, first+1, … or err.
type appendResp struct {
	first uint64
	err   error
}

// reqPool recycles appendReqs (with their channel and buffers) once their
// response has been received: tidwall's WriteBatch copies the entry bytes,
// so nothing refers to buf after the answer.
var reqPool = sync.Pool{New: func() any { return &appendReq{resp: make(chan appendResp, 1)} }}

// maxPooledBuf keeps a large batch's buffer from being pinned by the pool.
const maxPooledBuf = 256 << 10

func putReq(r *appendReq) {
	if cap(r.buf) > maxPooledBuf || cap(r.entries) > 1024 {
		return
	}
	clear(r.entries)
	r.evs, r.entries, r.buf = nil, r.entries[:0], r.buf[:0]
	r.st = ackStamps{}
	reqPool.Put(r)
}

// Open locks the log in opts.Dir (creating it if needed), repairs a torn
// tail of its last segment and starts the committer. Damage that is not a
// torn tail is refused with a *CorruptError (wrapping ErrCorrupt).
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("wal: Options.Dir is required")
	}
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 4096
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.QuarantineDir == "" {
		opts.QuarantineDir = filepath.Join(filepath.Dir(filepath.Clean(opts.Dir)), "quarantine")
	}
	if err := mkdirAll(opts.Dir, opts.NoSync); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	l, err := open(opts, lock)
	if err != nil {
		lock.release()
		return nil, err
	}
	return l, nil
}

func open(opts Options, lock *dirLock) (*Log, error) {
	if err := refuseNames(opts.Dir, true); err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
	}
	// A damaged manifest is reported by the scan below (and refused).
	manifest, merr := ReadManifest(opts.Dir)
	if merr == nil {
		if err := finishCompaction(opts.Dir, manifest, opts.NoSync); err != nil {
			return nil, fmt.Errorf("wal: open %s: finish compaction: %w", opts.Dir, err)
		}
	}
	// Before anything in wal/ changes: the log's front must be where the
	// manifest says (archive_open.go).
	if err := checkArchivesAtOpen(opts.Dir, opts.Archive, manifest, opts.NoSync); err != nil {
		return nil, err
	}
	reps, tailSize, sealed, err := repairTail(opts.Dir, opts.QuarantineDir, opts.NoSync, opts.VerifyAfterOpen, opts.Acked, opts.AcceptTailLoss)
	if err != nil {
		return nil, err
	}
	var rep *events.WalRepaired
	if len(reps) > 0 {
		rep = reps[len(reps)-1]
	}
	// AllowEmpty: a compacted log whose one retained segment lost every
	// entry to a cut tail (a salvage accepted the loss) is empty, not
	// broken; its next entry gets the first retained seq.
	tw, err := twal.Open(opts.Dir, &twal.Options{NoSync: true, SegmentSize: opts.SegmentSize, DirPerms: 0o700, FilePerms: 0o600, AllowEmpty: true})
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
	}
	l := &Log{
		opts: opts, tw: tw, lock: lock, repaired: rep,
		changed:   make(chan struct{}),
		reqs:      make(chan *appendReq, 1024),
		done:      make(chan struct{}),
		exited:    make(chan struct{}),
		closeDone: make(chan struct{}),
		pwake:     make(chan struct{}, 1),
		wroteLast: make(chan struct{}),
		sealed:    sealed,
		verified:  make(chan struct{}),
	}
	l.stats.init()
	var pre *preallocator
	if !opts.NoSync && opts.Preallocate >= 0 && opts.SegmentSize >= preallocUnit {
		pre = newPreallocator(opts.SegmentSize, cmp.Or(opts.Preallocate, defaultPreallocChunk))
	}
	tww, err := newTwalWriter(tw, opts.Dir, opts.SegmentSize, int(tailSize), pre)
	if err != nil {
		tw.Close()
		return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
	}
	l.tww = tww
	var w Writer = tww
	if opts.Faults != nil {
		w = faultyWriter{w: tww, f: opts.Faults}
	}
	l.w = w
	l.first, _ = tw.FirstIndex()
	l.last, _ = tw.LastIndex()
	if l.last == 0 {
		l.first = 1
	}
	if manifest != nil {
		// Pending segments an archive could not take stay before it.
		l.first = manifest.firstSeq()
	}
	// A new log's first segment file, or one re-created by tidwall, must
	// have a durable directory entry before anything in it is acknowledged.
	if err := l.syncDirUnlessNoSync(); err != nil {
		tww.close(false)
		tw.Close()
		return nil, fmt.Errorf("wal: fsync %s: %w", opts.Dir, err)
	}
	if len(reps) > 0 {
		// Recorded directly, before the committer starts: the engine's
		// catch-up re-applies everything after its checkpoint, so Apply is
		// not called for them.
		entries := make([][]byte, 0, len(reps))
		for i, r := range reps {
			if r.FirstSeq == 0 {
				r.FirstSeq = l.last + 1
			}
			var ev *events.Event
			if ev, err = events.New("wal", r); err != nil {
				break
			}
			ev.TS = opts.Now().UnixMilli()
			var entry []byte
			if entry, err = EncodeEntry(withSeq(ev, l.last+1+uint64(i))); err != nil {
				break
			}
			entries = append(entries, entry)
		}
		if err == nil {
			err = l.writeGroup(l.last+1, entries)
		}
		if err != nil {
			tww.close(false)
			tw.Close()
			return nil, fmt.Errorf("wal: record repair: %w", err)
		}
		l.last += uint64(len(reps))
		if l.first == 0 {
			l.first = 1
		}
	}
	syncerDone := make(chan struct{})
	go l.syncLoop(syncerDone)
	go l.commitLoop(l.last+1, syncerDone)
	return l, nil
}

func (l *Log) syncDirUnlessNoSync() error {
	if l.opts.NoSync {
		return nil
	}
	return home.SyncDir(l.opts.Dir)
}

func withSeq(ev *events.Event, seq uint64) *events.Event { ev.Seq = seq; return ev }

// Repaired returns what Open cut as a torn tail, nil if nothing.
func (l *Log) Repaired() *events.WalRepaired { return l.repaired }

// Dir is the log directory.
func (l *Log) Dir() string { return l.opts.Dir }

// FirstSeq is the sequence of the first entry (1 for a new log).
func (l *Log) FirstSeq() uint64 { l.mu.Lock(); defer l.mu.Unlock(); return l.first }

// LastSeq is the sequence of the last durable entry, 0 when empty.
func (l *Log) LastSeq() uint64 { l.mu.Lock(); defer l.mu.Unlock(); return l.last }

// Err returns the cause of the failed state, or nil.
func (l *Log) Err() error { l.mu.Lock(); defer l.mu.Unlock(); return l.failed }

// Changed returns a channel closed the next time LastSeq grows.
func (l *Log) Changed() <-chan struct{} { l.mu.Lock(); defer l.mu.Unlock(); return l.changed }

// Append makes evs durable, in order and contiguous, and returns their
// sequences. It sets TS when zero (to the time of the call) and Seq. It
// returns only after the bytes (and, if a new segment was opened, the
// directory entry) are fsynced and Options.Apply has run. Once the events
// are queued the outcome is awaited even if ctx ends: a caller must never
// believe an append failed that may become durable.
func (l *Log) Append(ctx context.Context, evs ...*events.Event) ([]uint64, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	p, err := l.Enqueue(ctx, evs...)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// Pending is an append the committer has been handed (Enqueue); Wait
// returns its outcome. The zero value is an empty append.
type Pending struct {
	l *Log
	r *appendReq
	n int
}

// Enqueue validates, encodes and queues evs to the committer, and returns
// without waiting for them: appends enqueued one after the other by one
// goroutine get ascending sequences, in that order. Wait then returns
// what Append would have; it must be called exactly once for every
// Pending without error, for the events may become durable whatever the
// caller does. A caller that has queued one append can so prepare and
// queue the next while the first is written and fsynced.
func (l *Log) Enqueue(ctx context.Context, evs ...*events.Event) (Pending, error) {
	if len(evs) == 0 {
		return Pending{}, nil
	}
	var call int64
	if l.opts.AckTrace != nil {
		call = mono()
	}
	if l.hasFailed.Load() {
		return Pending{}, l.Err()
	}
	if err := ctx.Err(); err != nil {
		return Pending{}, err
	}
	if i := repeated(evs); i >= 0 {
		// The committer sets Seq on the caller's events: one *Event twice
		// would be written twice but carry (and show Apply) one sequence.
		return Pending{}, fmt.Errorf("%w: event %d is event %d again", ErrInvalidEvent, i, slices.Index(evs, evs[i]))
	}
	// Encoding happens here, in the appenders' goroutines, in parallel; the
	// committer only patches the seq and computes the CRC.
	now := l.opts.Now().UnixMilli()
	r := reqPool.Get().(*appendReq)
	r.evs = evs
	if len(evs) > 1 {
		// One allocation for the whole batch, not a copy per growth.
		need := 0
		for _, ev := range evs {
			if ev != nil {
				need += entryBound(ev)
			}
		}
		r.buf = slices.Grow(r.buf, need)
	}
	ends := r.entries[:0] // end offsets in buf first, slices after
	for i, ev := range evs {
		if ev == nil || ev.Type == "" || ev.V < 1 || ev.ID == "" {
			putReq(r)
			return Pending{}, fmt.Errorf("%w: event %d lacks type, version or id", ErrInvalidEvent, i)
		}
		if ev.TS == 0 {
			ev.TS = now
		}
		var err error
		if r.buf, err = appendUnsequenced(r.buf, ev); err != nil {
			putReq(r)
			return Pending{}, fmt.Errorf("%w: event %d (%s): %v", ErrInvalidEvent, i, ev.Type, err)
		}
		ends = append(ends, r.buf[:len(r.buf):len(r.buf)])
	}
	// Slice buf only now: appending may have moved it.
	start := 0
	for i, e := range ends {
		ends[i] = r.buf[start:len(e):len(e)]
		start = len(e)
	}
	r.entries = ends
	if l.opts.AckTrace != nil {
		r.st.call, r.st.queued = call, mono()
	}
	// Queued under sendMu's read lock: once Close has taken it no request
	// can be queued, so the committer, which answers every request it
	// receives and drains the queue when it stops, answers this one — and
	// the wait below needs no second channel (a select on one shared by
	// every appender costs a contended lock per append).
	l.sendMu.RLock()
	if l.closed {
		l.sendMu.RUnlock()
		putReq(r)
		return Pending{}, ErrClosed
	}
	l.queued.Add(1)
	select {
	case l.reqs <- r:
	default:
		select {
		case l.reqs <- r:
		case <-ctx.Done():
			l.queued.Add(-1)
			l.sendMu.RUnlock()
			putReq(r)
			return Pending{}, ctx.Err()
		}
	}
	l.sendMu.RUnlock()
	return Pending{l: l, r: r, n: len(evs)}, nil
}

// Wait returns the sequences of the enqueued events once they are
// durable and Options.Apply has run, or the error that failed them.
func (p Pending) Wait() ([]uint64, error) {
	if p.r == nil {
		return nil, nil
	}
	res := <-p.r.resp
	if p.l.opts.AckTrace != nil && res.err == nil {
		p.l.opts.AckTrace(p.r.st.timing(mono()))
	}
	putReq(p.r)
	if res.err != nil {
		return nil, res.err
	}
	seqs := make([]uint64, p.n)
	for i := range seqs {
		seqs[i] = res.first + uint64(i)
	}
	return seqs, nil
}

// repeated returns the index of the first non-nil event of evs that
// appears earlier in it, -1 if none.
func repeated(evs []*events.Event) int {
	if len(evs) <= 16 {
		for i := 1; i < len(evs); i++ {
			if evs[i] != nil && slices.Contains(evs[:i], evs[i]) {
				return i
			}
		}
		return -1
	}
	seen := make(map[*events.Event]struct{}, len(evs))
	for i, ev := range evs {
		if _, ok := seen[ev]; ok && ev != nil {
			return i
		}
		seen[ev] = struct{}{}
	}
	return -1
}

// encodeUnsequenced encodes ev as an entry with seq 0 and no CRC yet.
func encodeUnsequenced(ev *events.Event) ([]byte, error) {
	return appendUnsequenced(nil, ev)
}

// appendUnsequenced appends the entry encodeUnsequenced returns to dst;
// on error dst is returned unchanged in length.
func appendUnsequenced(dst []byte, ev *events.Event) ([]byte, error) {
	if err := events.CheckData(ev.Data); err != nil {
		return dst, err
	}
	at := len(dst)
	c := *ev // on the stack: AppendEnvelope keeps no reference
	c.Seq = 0
	b := slices.Grow(dst, entryBound(&c))
	b = append(b, make([]byte, entryHeader)...)
	b, err := events.AppendEnvelope(b, &c)
	if err != nil {
		return dst[:at], err
	}
	b[at] = entryVersion
	if _, ok := entrySeq(b[at:]); !ok {
		return dst[:at], errors.New("envelope does not start with a fixed-width seq")
	}
	return b, nil
}

// entryBound is at least the bytes the fast encoder writes for ev.
func entryBound(ev *events.Event) int {
	return entryHeader + events.EnvelopeBound(ev)
}

// sealEntry writes seq and the CRC into an entry from encodeUnsequenced.
func sealEntry(b []byte, seq uint64) {
	binary.BigEndian.PutUint64(b[seqOff:seqEnd], seq)
	binary.BigEndian.PutUint32(b[1:5], crc32.Checksum(b[entryHeader:], castagnoli))
}

// Before an fsync the syncer yields, so that the fsync covers appends
// about to be written too: minSyncYields times in any case, then while
// appends are queued and not yet written, up to maxSyncYields in all.
//
// The unconditional yields are for the appenders the last fsync answered:
// they are runnable but have not queued their next append yet. Without
// them the next fsync starts at once with only the group written during
// the last one, and those appenders wait for that whole fsync and then
// their own: every acknowledgement took two fsyncs (p50 ack ≈ 2.1–2.5×
// the median fsync at 64 appenders), and the p99 acknowledgement two
// fsyncs' tails. With them most of those appends join the next fsync
// (groups of ~49 instead of ~34 at 64 appenders): p99 ack 1.40–1.88× the
// run's p99 group fsync against 1.51–2.17× without them, in six runs each
// interleaved (`cmlab bench wal`, see the README).
const (
	minSyncYields = 4
	maxSyncYields = 8
)

// maxIdleYields is how many times the committer yields to runnable
// appenders, finding the queue empty, before it writes the group.
const maxIdleYields = 2

// commitLoop forms groups and writes them; next is the sequence of the
// next entry. It returns after the syncer has finished.
func (l *Log) commitLoop(next uint64, syncerDone <-chan struct{}) {
	defer close(l.exited)
	var group []*appendReq
	for {
		select {
		case r := <-l.reqs:
			group = append(group, r)
		case <-l.done:
			close(l.wroteLast)
			<-syncerDone
			l.drain(ErrClosed)
			return
		}
		n := len(group[0].evs)
		idle := 0
	collect:
		for n < l.opts.MaxBatch {
			select {
			case r := <-l.reqs:
				group = append(group, r)
				n += len(r.evs)
				idle = 0
			default:
				// Appenders acknowledged by the last group are runnable
				// but may not have queued their next append yet: yield
				// so they can join this group instead of forming the
				// next one. Without this, N steady appenders split into
				// two alternating groups of N/2, halving throughput.
				if idle == maxIdleYields {
					break collect
				}
				idle++
				runtime.Gosched()
			}
		}
		next = l.write(group, n, next)
		group = make([]*appendReq, 0, len(group))
	}
}

func (l *Log) drain(err error) {
	for {
		select {
		case r := <-l.reqs:
			r.resp <- appendResp{err: err}
		default:
			return
		}
	}
}

// writeGroup writes entries (seqs first…) and makes them durable: one
// WriteBatch, one fsync, and a directory fsync when a segment was created.
// Open uses it before the committer and the syncer start.
func (l *Log) writeGroup(first uint64, entries [][]byte) error {
	cycled, err := l.w.WriteBatch(first, entries)
	if err != nil {
		return fmt.Errorf("%w: write: %w", ErrFailed, err)
	}
	return l.sync(cycled)
}

// sync fsyncs the tail segment, and the directory when cycled.
func (l *Log) sync(cycled bool) error {
	if l.opts.NoSync {
		return nil
	}
	start := time.Now()
	if err := l.w.Sync(); err != nil {
		l.stats.fsyncFailed(err)
		return fmt.Errorf("%w: fsync: %w", ErrFailed, err)
	}
	if cycled {
		if err := l.w.SyncDir(); err != nil {
			l.stats.fsyncFailed(err)
			return fmt.Errorf("%w: fsync directory: %w", ErrFailed, err)
		}
	}
	l.stats.fsynced(time.Since(start))
	return nil
}

// write seals and writes one group (sequences from next on) and hands it
// to the syncer; it returns the sequence after the group. A failed log
// answers the group with its cause and writes nothing.
func (l *Log) write(group []*appendReq, n int, next uint64) uint64 {
	defer l.queued.Add(-int64(len(group)))
	if err := l.Err(); err != nil {
		failGroup(group, err)
		return next
	}
	entries := l.scratch[:0]
	defer func() { clear(entries); l.scratch = entries[:0] }()
	trace := l.opts.AckTrace != nil
	var sealStart, sealed int64
	if trace {
		sealStart = mono()
	}
	seq := next
	var bytes int
	for _, r := range group {
		for i, e := range r.entries {
			sealEntry(e, seq)
			r.evs[i].Seq = seq
			entries = append(entries, e)
			bytes += len(e)
			seq++
		}
	}
	if trace {
		sealed = mono()
	}
	cycled, err := l.w.WriteBatch(next, entries)
	if err != nil {
		l.setFailed(fmt.Errorf("%w: write: %w", ErrFailed, err))
		failGroup(group, l.Err())
		return next
	}
	wr := &written{group: group, n: n, bytes: bytes, first: next, cycled: cycled}
	if trace {
		wr.sealStart, wr.sealed, wr.written = sealStart, sealed, mono()
	}
	l.pmu.Lock()
	l.pending = append(l.pending, wr)
	l.pmu.Unlock()
	select {
	case l.pwake <- struct{}{}:
	default:
	}
	return seq
}

func failGroup(group []*appendReq, err error) {
	for _, r := range group {
		r.resp <- appendResp{err: err}
	}
}

// syncLoop makes written groups durable: one fsync (plus a directory fsync
// when any of them created a segment) for everything written before it
// starts, then Apply, then the acknowledgements, in sequence order. After
// a failure it fsyncs nothing again and answers every group with the cause.
func (l *Log) syncLoop(done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-l.pwake:
		case <-l.wroteLast:
			// The committer writes nothing more: finish what it wrote.
			select {
			case <-l.pwake:
			default:
			}
			if !l.syncPending() {
				return
			}
			continue
		}
		// Let the appenders the last fsync answered queue again, and the
		// committer write what is queued, so that this fsync covers them
		// too (see minSyncYields).
		for i := 0; i < maxSyncYields && (i < minSyncYields || l.queued.Load() > 0); i++ {
			runtime.Gosched()
		}
		l.syncPending()
	}
}

// syncPending syncs and answers the pending groups; false if there were none.
func (l *Log) syncPending() bool {
	l.pmu.Lock()
	ws := l.pending
	l.pending = nil
	l.pmu.Unlock()
	if len(ws) == 0 {
		return false
	}
	fail := func(err error) {
		for _, w := range ws {
			failGroup(w.group, err)
		}
	}
	if err := l.Err(); err != nil {
		fail(err)
		return true
	}
	cycled, n, bytes := false, 0, 0
	for _, w := range ws {
		cycled = cycled || w.cycled
		n += w.n
		bytes += w.bytes
	}
	var syncStart, synced int64
	trace := l.opts.AckTrace != nil
	if trace {
		syncStart = mono()
	}
	if err := l.sync(cycled); err != nil {
		l.setFailed(err)
		fail(l.Err())
		return true
	}
	if trace {
		synced = mono()
	}
	// A write the committer failed meanwhile fails these too: in a
	// failed log nothing more is acknowledged.
	if err := l.Err(); err != nil {
		fail(err)
		return true
	}
	l.stats.grouped(n, bytes)
	if l.opts.Apply != nil {
		all := make([]*events.Event, 0, n)
		for _, w := range ws {
			for _, r := range w.group {
				all = append(all, r.evs...)
			}
		}
		if err := l.apply(all); err != nil {
			l.setFailed(fmt.Errorf("%w: apply: %w", ErrFailed, err))
			fail(l.Err())
			return true
		}
	}
	last := ws[len(ws)-1]
	l.mu.Lock()
	l.last = last.first + uint64(last.n) - 1
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	var answered int64
	if trace {
		answered = mono()
	}
	for _, w := range ws {
		s := w.first
		for _, r := range w.group {
			first := s
			s += uint64(len(r.evs)) // before the answer: r is recycled after it
			if trace {
				r.st.sealStart, r.st.sealed, r.st.written = w.sealStart, w.sealed, w.written
				r.st.syncStart, r.st.synced, r.st.answered, r.st.group = syncStart, synced, answered, n
			}
			r.resp <- appendResp{first: first}
		}
	}
	return true
}

// apply calls Options.Apply, turning a panic into an error: a bug in a
// projection must not take the daemon down with it.
func (l *Log) apply(evs []*events.Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return l.opts.Apply(evs)
}

func (l *Log) setFailed(err error) {
	l.mu.Lock()
	if l.failed == nil {
		l.failed = err
	}
	l.mu.Unlock()
	l.hasFailed.Store(true)
}

// Read returns the event at seq. A seq before the first retained one of
// a compacted log is read from its archive (see Options.Archive), or is a
// *CompactedError.
func (l *Log) Read(seq uint64) (*events.Event, error) {
	if seq == 0 || seq > l.LastSeq() {
		return nil, fmt.Errorf("%w: seq %d", ErrNotFound, seq)
	}
	if seq < l.FirstSeq() {
		var out *events.Event
		var rerr error
		readEvents(l.opts.Dir, l.opts.Archive, seq, seq, func(ev *events.Event, err error) bool {
			out, rerr = ev, err
			return false
		})
		if rerr == nil && out == nil {
			rerr = fmt.Errorf("%w: seq %d", ErrNotFound, seq)
		}
		return out, rerr
	}
	l.readMu.Lock()
	b, err := l.tw.Read(seq)
	l.readMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("wal: read seq %d: %w", seq, err)
	}
	return DecodeEntry(b, seq)
}

// Events iterates over the events from seq from up to the LastSeq at the
// time of the call, reading the segment files sequentially. An error (it
// wraps ErrCorrupt for damaged bytes) is yielded once and ends the iteration.
func (l *Log) Events(from uint64) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		readEvents(l.opts.Dir, l.opts.Archive, from, l.LastSeq(), yield)
	}
}

// Close stops the committer (pending appends fail with ErrClosed), closes
// the files and releases the lock. A later or concurrent Close returns
// nil once the first has finished.
func (l *Log) Close() error {
	l.sendMu.Lock()
	if l.closed {
		l.sendMu.Unlock()
		<-l.closeDone
		return nil
	}
	l.closed = true
	l.sendMu.Unlock()
	defer close(l.closeDone)
	close(l.done)
	<-l.exited
	l.verifyGo.Do(func() { l.verifyRep.Err = ErrClosed; close(l.verified) })
	<-l.verified
	failed := l.Err() // read after the last write and fsync
	// tidwall's Close fsyncs the tail. After a failure that would be a
	// retried fsync, which must never happen (its success would prove
	// nothing: Linux may have dropped the dirty pages it failed to write),
	// so a failed log's tidwall handle is abandoned instead; the runtime's
	// finalizer closes its descriptor.
	err := l.tww.close(failed == nil)
	if failed == nil {
		if cerr := l.tw.Close(); err == nil {
			err = cerr
		}
	}
	if lerr := l.lock.release(); err == nil {
		err = lerr
	}
	return err
}

package projections

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// Errors of the projector.
var (
	// ErrCheckpoint is wrapped by errors reading state/checkpoint.json.
	ErrCheckpoint = errors.New("projections: bad checkpoint")
	// ErrFeedbackPartial is returned when feedback.jsonl ends with a line
	// another program has not finished where the projector must write: the
	// partial line may be neither consumed nor moved, so the write waits.
	ErrFeedbackPartial = errors.New("projections: feedback.jsonl ends with an unfinished foreign line")
	// ErrIngestPending is returned by Checkpoint while foreign feedback
	// lines adopted in place await their feedback.ingested events.
	ErrIngestPending = errors.New("projections: adopted feedback lines await ingestion")
	// ErrFeedbackDamaged is returned by an Apply under StrictForeign that
	// meets, where its own line belongs in feedback.jsonl, a line that is
	// corrupt or carries an id the log holds: not another program's line
	// to adopt but damage, which only a regeneration sorts out.
	ErrFeedbackDamaged = errors.New("projections: feedback.jsonl holds damaged lines past the checkpoint")
	// ErrClosed is returned by a closed projector.
	ErrClosed = errors.New("projections: projector closed")
)

// Default limits.
const (
	// DefaultMaxOpenFiles bounds the view files kept open between writes.
	DefaultMaxOpenFiles = 256
	writerBufferSize    = 64 << 10
)

// Options configure Open.
type Options struct {
	Home home.Home
	// Fresh ignores state/checkpoint.json and any view on disk: every view
	// is written from empty (a rebuild into a directory). Feedback.jsonl is
	// still never truncated; Rebuild removes the old views first.
	Fresh bool
	// Exclusive promises that no other program writes these views (a
	// rebuild into a private directory): feedback.jsonl is not checked for
	// foreign lines and writes stay buffered until a checkpoint or Close.
	Exclusive bool
	// NoSync skips every fsync of view files (a throw-away rebuild).
	NoSync bool
	// MaxOpenFiles bounds the open view files; default DefaultMaxOpenFiles.
	MaxOpenFiles int
	// OpenFile opens view files for writing and feedback.jsonl for the
	// foreign-line check; default os.OpenFile. It is the fault seam through
	// which tests make an open fail (EMFILE) to check that a projection
	// failure never fails the log.
	OpenFile func(name string, flag int, perm os.FileMode) (*os.File, error)
	// DeferWholeCheck skips Open's whole-view CRC check (the tail check
	// stays): a view whose checkpoint records a whole-view CRC is trusted
	// at open, listed in Unverified, and the caller checks it after open
	// (VerifyViews) and regenerates the views if any differs. Open then
	// reads TailBytes per view instead of every view whole.
	DeferWholeCheck bool
	// SealAfter seals a terminal block's output view at a checkpoint once
	// its block ended, or once this many events have passed since it was
	// last written (sealed.go); 0 (a rebuild, a replay) seals nothing. A
	// view sealed already stays sealed whatever the option. The engine
	// uses DefaultSealAfter.
	SealAfter uint64
}

// ViewCheck is a whole-view CRC that Open did not check
// (Options.DeferWholeCheck): the first Size bytes of View must have CRC.
type ViewCheck struct {
	View string
	Size int64
	CRC  uint32
}

// ForeignLine is a complete line that another program appended to
// feedback.jsonl: Raw without its '\n', Offset where it starts.
type ForeignLine = events.FeedbackIngested

type viewFile struct {
	f *os.File
	w *bufio.Writer
	// dirty: p.unsync holds this view already (write need not set it
	// again for every line); cleared with p.unsync.
	dirty bool
	// lastSeq is the seq of the event that last wrote the view while
	// open (p.lastWrite once closed): when it may be sealed.
	lastSeq uint64
}

// Projector writes every view of one home. Apply is called with events in
// log order; it is safe for concurrent use, though the engine calls it from
// its committer only.
type Projector struct {
	opts Options

	mu      sync.Mutex
	closed  bool
	last    uint64           // last applied seq
	sizes   map[string]int64 // known size of every view written or checkpointed
	open    map[string]*viewFile
	unsync  map[string]bool // views written since the last checkpoint
	newDirs map[string]bool // directories holding files created since the last checkpoint
	damaged map[string]bool // views found shorter than projected while live

	tails      map[string]viewTail // per view, its tail checksum at a size (checkpoint.go)
	crcs       map[string]viewTail // per view, the CRC-32C of its bytes up to a size
	unverified []ViewCheck         // Options.DeferWholeCheck: whole-view CRCs trusted at Open

	// Sealed views (sealed.go): what state/sealed-views.jsonl holds and
	// the checkpoint vouches for; its check Open deferred; views the
	// checkpoint or the file lists that Open found damaged and the
	// catch-up rebuilds; and per closed view of p.sizes the seq of the
	// event that last wrote it.
	sealed           SealedViews
	unverifiedSealed SealedCheck
	rebuilding       map[string]bool
	lastWrite        map[string]uint64
	ended            map[string]bool // output views of blocks a pty.block.end closed
	cur              uint64          // seq of the event being applied
	// feedbackDamaged: Open found feedback.jsonl holding bytes that the
	// checkpoint does not vouch for (see FeedbackDamaged).
	feedbackDamaged bool

	// Catch-up: writes of events up to skipThrough go only to views absent
	// from intact (they are being rebuilt); intact views already hold them.
	skipThrough uint64
	intact      map[string]bool

	foreign  []ForeignLine     // complete foreign feedback lines adopted during Apply, to ingest
	adopted  map[int64]bool    // offsets of adopted lines whose ingestion is not applied yet
	expected map[int64][]byte  // catch-up: lines of feedback.ingested events ahead, by offset
	held     func(string) bool // StrictForeign: ids the log holds
	skipped  uint64            // events whose payload could not be projected
	failed   error             // an Apply failed part-way: no checkpoint may cover it
	r        rendered
	lines    arena         // holds p.r's lines while one event is applied
	fbBatch  feedbackBatch // feedback lines of one Apply not yet written (feedback_batch.go)
}

// New returns a projector writing the views of h from empty, without
// catch-up: what a replay into a new directory needs.
func New(h home.Home) *Projector {
	p, _ := Open(Options{Home: h, Fresh: true})
	return p
}

// Open returns a projector for opts.Home. Unless opts.Fresh, it loads
// state/checkpoint.json and plans the catch-up (doc.go): views longer than
// their checkpoint are cut back to it (feedback.jsonl excepted), views
// shorter than it or missing are emptied and rebuilt. ReplayFrom then says
// where the log must be re-applied from.
func Open(opts Options) (*Projector, error) {
	if opts.MaxOpenFiles <= 0 {
		opts.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if opts.OpenFile == nil {
		opts.OpenFile = os.OpenFile
	}
	p := &Projector{
		opts:    opts,
		sizes:   map[string]int64{},
		tails:   map[string]viewTail{},
		crcs:    map[string]viewTail{},
		open:    map[string]*viewFile{},
		unsync:  map[string]bool{},
		newDirs: map[string]bool{},
		damaged: map[string]bool{},
		intact:  map[string]bool{},
		adopted: map[int64]bool{},

		rebuilding: map[string]bool{},
		lastWrite:  map[string]uint64{},
		ended:      map[string]bool{},
	}
	if opts.Fresh {
		return p, nil
	}
	cp, err := ReadCheckpoint(opts.Home)
	if err != nil {
		// A checkpoint that cannot be read is as good as none: every view
		// is rebuilt from the log.
		cp = nil
	}
	if cp != nil {
		// Sealed views the checkpoint vouches for by one record: a file
		// that does not hold it makes the checkpoint as good as none.
		if ok, err := p.openSealed(cp.Sealed); err != nil {
			return nil, err
		} else if !ok {
			cp = nil
		}
	}
	allIntact := true
	if cp != nil && !opts.DeferWholeCheck {
		intact, ok, err := p.checkSealed(cp)
		if err != nil {
			return nil, err
		}
		if !ok {
			cp = nil
		}
		allIntact = intact
	}
	if cp == nil {
		p.sealed = SealedViews{}
		clear(p.rebuilding)
		if fi, err := os.Stat(p.path(FeedbackView)); err == nil && fi.Size() > 0 {
			p.feedbackDamaged = true
		}
		return p, nil
	}
	if opts.DeferWholeCheck {
		p.unverifiedSealed = SealedCheck{Size: p.sealed.Size, CRC: p.sealed.CRC}
	}
	for _, v := range slices.Sorted(maps.Keys(cp.Views)) {
		want := cp.Views[v]
		if !validViewPath(v) {
			continue
		}
		path := p.path(v)
		if _, err := dropNonRegular(path); err != nil { // nofollow.go
			return nil, err
		}
		fi, err := os.Stat(path)
		if err == nil && fi.Size() >= want {
			// A size off a line boundary, a tail that differs from the
			// checkpoint's checksum, or any byte before the size that
			// differs from its whole-view CRC: the view is rebuilt, like a
			// short one.
			if ok, terr := tailMatches(path, v, want, cp); terr != nil || !ok {
				fi = nil
			} else if crc, has := cp.CRCs[v]; has && want > 0 && opts.DeferWholeCheck {
				p.crcs[v] = viewTail{size: want, crc: crc}
				p.unverified = append(p.unverified, ViewCheck{View: v, Size: want, CRC: crc})
			} else if crc, ok, cerr := wholeMatches(path, v, want, cp); cerr != nil || !ok {
				fi = nil
			} else if _, has := cp.CRCs[v]; has || want == 0 {
				p.crcs[v] = viewTail{size: want, crc: crc}
			}
		}
		if v == FeedbackView && err == nil && (fi == nil || fi.Size() < want) {
			if st, serr := os.Stat(path); serr == nil && st.Size() > 0 {
				p.feedbackDamaged = true
			}
		}
		switch {
		case err == nil && fi != nil && fi.Size() >= want:
			if fi.Size() > want && v != FeedbackView {
				// Bytes past the checkpoint: re-projected below (or garbage).
				if err := os.Truncate(path, want); err != nil {
					return nil, fmt.Errorf("projections: cut %s back to %d: %w", v, want, err)
				}
			}
			p.intact[v] = true
			p.sizes[v] = want
			if sealable(v) && cp.Version >= checkpointVersion {
				// Written at cp.Seq at the latest. A version 2 checkpoint
				// (a build without sealed views) lists every block ever:
				// 0 lets the first checkpoint seal them.
				p.lastWrite[v] = cp.Seq
			}
			if crc, ok := cp.Tails[v]; ok {
				p.tails[v] = viewTail{size: want, crc: crc}
			}
		case err == nil || errors.Is(err, fs.ErrNotExist):
			// Shorter than its checkpoint, or missing: rebuilt from the log.
			allIntact = false
			p.rebuilding[v] = true // not a sealed view's (sealedSkip)
			if v != FeedbackView && err == nil {
				if err := os.Truncate(path, 0); err != nil {
					return nil, fmt.Errorf("projections: empty %s: %w", v, err)
				}
			}
		default:
			return nil, fmt.Errorf("projections: stat %s: %w", v, err)
		}
	}
	if allIntact {
		p.last = cp.Seq
	}
	p.skipThrough = cp.Seq
	return p, nil
}

// Unverified lists the views whose whole-view CRC Open trusted without
// reading them (Options.DeferWholeCheck), in view order.
func (p *Projector) Unverified() []ViewCheck {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.unverified)
}

// VerifyViews reads the first Size bytes of every checked view of h and
// returns those whose CRC-32C differs from the one recorded, or whose file
// is shorter or missing. Views are append-only below their checkpointed
// size, so a projector may write them meanwhile. It stops with ctx's error.
func VerifyViews(ctx context.Context, h home.Home, checks []ViewCheck) ([]ViewCheck, error) {
	var damaged []ViewCheck
	buf := make([]byte, 1<<20)
	for _, c := range checks {
		f, err := os.Open(filepath.Join(h.Dir, filepath.FromSlash(c.View)))
		if errors.Is(err, fs.ErrNotExist) {
			damaged = append(damaged, c)
			continue
		}
		if err != nil {
			return damaged, fmt.Errorf("projections: verify %s: %w", c.View, err)
		}
		var crc uint32
		short := false
		for off := int64(0); off < c.Size; {
			if err := ctx.Err(); err != nil {
				f.Close()
				return damaged, err
			}
			n := min(int64(len(buf)), c.Size-off)
			if _, err := f.ReadAt(buf[:n], off); errors.Is(err, io.EOF) {
				short = true
				break
			} else if err != nil {
				f.Close()
				return damaged, fmt.Errorf("projections: verify %s: %w", c.View, err)
			}
			crc = crc32.Update(crc, castagnoli, buf[:n])
			off += n
		}
		f.Close()
		if short || crc != c.CRC {
			damaged = append(damaged, c)
		}
	}
	return damaged, nil
}

// validViewPath accepts the home-relative names the projector itself
// produces; anything else in a checkpoint is ignored.
func validViewPath(v string) bool {
	if v == "" || filepath.IsAbs(v) {
		return false
	}
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(v)))
	if clean != v {
		return false
	}
	for _, prefix := range []string{"feedback/", "lab/", "pty/", "steps/"} {
		if len(v) > len(prefix) && v[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

// ReplayFrom is the first sequence the caller must Apply to bring the views
// up to the log: 1 after a rebuild was planned, else the checkpoint's seq+1.
func (p *Projector) ReplayFrom() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last + 1
}

// LastSeq is the sequence of the last applied event.
func (p *Projector) LastSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Skipped counts the events that projected nothing because their payload
// could not be decoded or rendered.
func (p *Projector) Skipped() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.skipped
}

func (p *Projector) path(view string) string {
	return filepath.Join(p.opts.Home.Dir, filepath.FromSlash(view))
}

// Apply projects evs, which must follow the last applied event in log
// order; events already applied are skipped. Unless Exclusive, every byte
// is handed to the kernel (write(2)) before Apply returns, so a reader of
// the view sees it.
func (p *Projector) Apply(evs []*events.Event) error {
	return p.applyBatch(evs, nil, nil)
}

func (p *Projector) applyOne(ev *events.Event) error {
	p.lines.reset()
	p.r.a = &p.lines
	err := render(ev, &p.r)
	return p.applyRendered(ev, &p.r, err)
}

// applyRendered writes what render produced for ev (renderErr is its error).
func (p *Projector) applyRendered(ev *events.Event, r *rendered, renderErr error) error {
	if renderErr != nil {
		// Not projectable (unknown version, malformed payload): every
		// projection of this log skips it alike, so views stay deterministic.
		p.skipped++
		return nil
	}
	catchingUp := ev.Seq != 0 && ev.Seq <= p.skipThrough
	p.cur = ev.Seq
	for _, w := range r.writes {
		if catchingUp && (p.intact[w.view] || p.sealedSkip(w.view)) {
			continue
		}
		if w.view == FeedbackView {
			ingestAt := int64(-1)
			if ev.Type == events.TypeFeedbackIngested {
				if in, err := events.DecodeAs[*events.FeedbackIngested](ev); err == nil {
					ingestAt = in.Offset
				}
			}
			var err error
			switch {
			case !p.opts.Exclusive && ingestAt < 0 && p.fbBatch.on:
				p.fbBatch.add(w.data) // written at the end of the batch
			case !p.opts.Exclusive:
				if err = p.flushFeedbackBatch(); err == nil {
					err = p.writeFeedback(w.data, ingestAt)
				}
			case ingestAt >= 0 && ingestAt < p.sizes[FeedbackView]:
				err = p.insertFeedback(w.data, ingestAt)
			default:
				err = p.write(w.view, w.data)
			}
			if err != nil {
				return fmt.Errorf("projections: seq %d: %w", ev.Seq, err)
			}
			continue
		}
		if err := p.write(w.view, w.data); err != nil {
			return fmt.Errorf("projections: seq %d: %w", ev.Seq, err)
		}
	}
	if ev.Type == events.TypePtyBlockEnd && p.opts.SealAfter > 0 {
		// A closed block's output view is written no more: sealed at the
		// next checkpoint (sealed.go).
		if be, err := events.DecodeAs[*events.PtyBlockEnd](ev); err == nil && validID(ev.Stream) && validID(be.Block.BlockID) {
			if v := PtyBlockOutputView(ev.Stream, be.Block.BlockID); p.sizes[v] > 0 {
				p.ended[v] = true
			}
		}
	}
	return nil
}

// applyBatch applies evs under p.mu. rs and errs are what render gave for
// them, rs[i] and errs[i] for evs[i], when it ran elsewhere (Rebuild's
// workers); with rs nil (Apply) each event is rendered here.
func (p *Projector) applyBatch(evs []*events.Event, rs []rendered, errs []error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.failed != nil {
		return p.failed
	}
	p.fbBatch.start(!p.opts.Exclusive)
	defer p.fbBatch.stop()
	for i, ev := range evs {
		if ev.Seq != 0 && ev.Seq <= p.last {
			continue
		}
		var err error
		if rs == nil {
			err = p.applyOne(ev)
		} else {
			err = p.applyRendered(ev, &rs[i], errs[i])
		}
		if err != nil {
			p.flushAll()
			p.failed = err
			return err
		}
		if ev.Seq != 0 {
			p.last = ev.Seq
		}
	}
	if err := p.flushFeedbackBatch(); err != nil {
		p.flushAll()
		p.failed = err
		return err
	}
	if p.opts.Exclusive {
		return nil
	}
	return p.flushAll()
}

// file returns the open view file, opening (and creating) it if needed.
// A view the projector has no size for is new: any bytes on disk are stale
// output of a crashed run and are cut (feedback.jsonl excepted).
func (p *Projector) file(view string) (*viewFile, error) {
	if vf, ok := p.open[view]; ok {
		return vf, nil
	}
	if len(p.open) >= p.opts.MaxOpenFiles {
		if err := p.evict(); err != nil {
			return nil, err
		}
	}
	path := p.path(view)
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); err != nil {
		if err := p.mkdirs(dir); err != nil {
			return nil, err
		}
	}
	if _, err := dropNonRegular(path); err != nil { // nofollow.go
		return nil, err
	}
	f, err := p.opts.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, home.FilePerm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	known, ok := p.sizes[view]
	if !ok && fi.Size() > 0 {
		// A sealed view written again (a quiet block's output resumed):
		// its record gives the size, tail and CRC the checkpoint gave it.
		r, sealed, err := p.sealedRecord(view)
		if err != nil {
			f.Close()
			return nil, err
		}
		if sealed {
			known, ok = r.Size, true
			p.tails[view] = viewTail{size: r.Size, crc: r.Tail}
			p.crcs[view] = viewTail{size: r.Size, crc: r.CRC}
		}
	}
	switch {
	case !ok:
		known = 0
		p.crcs[view] = viewTail{}
		if view != FeedbackView && fi.Size() > 0 {
			if err := f.Truncate(0); err != nil {
				f.Close()
				return nil, err
			}
		}
		p.newDirs[dir] = true
	case fi.Size() > known && view != FeedbackView:
		if err := f.Truncate(known); err != nil {
			f.Close()
			return nil, err
		}
	}
	p.sizes[view] = known
	pos := known
	if fi.Size() < known {
		// Someone cut the view under us. Keep appending at its end; the
		// sizes (and so the checkpoint) keep what was projected, so the
		// next open finds the view short and rebuilds it.
		p.damaged[view] = true
		pos = fi.Size()
	}
	if _, err := f.Seek(pos, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	vf := &viewFile{f: f, w: bufio.NewWriterSize(f, writerBufferSize), lastSeq: p.lastWrite[view]}
	delete(p.lastWrite, view)
	p.open[view] = vf
	return vf, nil
}

// mkdirs creates dir and its missing parents, remembering each parent whose
// entries changed so that the next checkpoint fsyncs it.
func (p *Projector) mkdirs(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) || d == p.opts.Home.Dir {
			break
		}
	}
	if err := os.MkdirAll(dir, home.DirPerm); err != nil {
		return err
	}
	for _, d := range missing {
		p.newDirs[filepath.Dir(d)] = true
	}
	return nil
}

func (p *Projector) write(view string, data []byte) error {
	vf, err := p.file(view)
	if err != nil {
		return err
	}
	if _, err := vf.w.Write(data); err != nil {
		return err
	}
	p.extendCRC(view, p.sizes[view], data)
	p.sizes[view] += int64(len(data))
	vf.lastSeq = p.cur
	if !vf.dirty {
		p.unsync[view] = true
		vf.dirty = true
	}
	return nil
}

// extendCRC carries view's whole-view CRC over data written at off, when
// it was known up to off; otherwise the next checkpoint reads it back.
func (p *Projector) extendCRC(view string, off int64, data []byte) {
	c, ok := p.crcs[view]
	if !ok || c.size != off {
		delete(p.crcs, view)
		return
	}
	p.crcs[view] = viewTail{size: off + int64(len(data)), crc: crc32.Update(c.crc, castagnoli, data)}
}

func (p *Projector) flushAll() error {
	var first error
	for _, vf := range p.open {
		if err := vf.w.Flush(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// evict closes every open view file (after flushing and, when it holds
// bytes not yet covered by a checkpoint, fsyncing it).
func (p *Projector) evict() error {
	for v, vf := range p.open {
		if err := p.closeView(v, vf); err != nil {
			return err
		}
	}
	return nil
}

func (p *Projector) closeView(v string, vf *viewFile) error {
	delete(p.open, v)
	if vf.lastSeq > 0 {
		p.lastWrite[v] = vf.lastSeq
	}
	if err := vf.w.Flush(); err != nil {
		vf.f.Close()
		return err
	}
	if p.unsync[v] && !p.opts.NoSync {
		if err := vf.f.Sync(); err != nil {
			vf.f.Close()
			return err
		}
		delete(p.unsync, v)
	}
	return vf.f.Close()
}

// Checkpoint makes the views durable up to the last applied event and
// records their sizes in state/checkpoint.json: view files are fsynced
// (and the directories of new ones), then the checkpoint is replaced
// atomically.
func (p *Projector) Checkpoint() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return p.checkpoint()
}

func (p *Projector) checkpoint() error {
	if p.failed != nil {
		return fmt.Errorf("projections: no checkpoint after a failed apply: %w", p.failed)
	}
	if len(p.adopted) > 0 {
		// Foreign feedback lines sit inside the accounted bytes but their
		// feedback.ingested events are not applied yet: a checkpoint now
		// would, after a crash, hide them from catch-up and from the log.
		// The next checkpoint, after the engine ingested them, covers them.
		return ErrIngestPending
	}
	if err := p.flushAll(); err != nil {
		return err
	}
	if !p.opts.NoSync {
		for _, v := range slices.Sorted(maps.Keys(p.unsync)) {
			if vf, ok := p.open[v]; ok {
				if err := vf.f.Sync(); err != nil {
					return fmt.Errorf("projections: fsync %s: %w", v, err)
				}
			} else if err := syncFile(p.path(v)); err != nil {
				return fmt.Errorf("projections: fsync %s: %w", v, err)
			}
		}
		for _, d := range slices.Sorted(maps.Keys(p.newDirs)) {
			if err := home.SyncDir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("projections: fsync dir %s: %w", p.opts.Home.Rel(d), err)
			}
		}
	}
	clear(p.unsync)
	for _, vf := range p.open {
		vf.dirty = false
	}
	clear(p.newDirs)
	cp := &Checkpoint{Version: checkpointVersionV2, Seq: p.last, Views: make(map[string]int64, len(p.sizes)), Tails: map[string]uint32{}, CRCs: map[string]uint32{}}
	for v, n := range p.sizes {
		if n > 0 {
			if err := p.tailOf(v, n); err != nil {
				return fmt.Errorf("projections: tail of %s: %w", v, err)
			}
			if err := p.crcOf(v, n); err != nil {
				return fmt.Errorf("projections: crc of %s: %w", v, err)
			}
		}
	}
	if err := p.seal(); err != nil {
		return fmt.Errorf("projections: seal views: %w", err)
	}
	if p.sealed.Count > 0 {
		sv := p.sealed
		cp.Version, cp.Sealed = checkpointVersion, &sv
	}
	for v, n := range p.sizes {
		cp.Views[v] = n
		if n > 0 {
			if t, ok := p.tails[v]; ok {
				cp.Tails[v] = t.crc
			}
			if c, ok := p.crcs[v]; ok {
				cp.CRCs[v] = c.crc
			}
		}
	}
	if err := writeCheckpoint(p.opts.Home, cp, p.opts.NoSync); err != nil {
		return fmt.Errorf("projections: write checkpoint: %w", err)
	}
	// Once a checkpoint covers everything, no view is being rebuilt any more.
	p.skipThrough = 0
	clear(p.intact)
	clear(p.rebuilding)
	return nil
}

// tailOf makes p.tails[v] the tail checksum of v at size n: carried over
// when v has not changed size since it was computed, else read back from
// the file (flushed). A file shorter than n (cut under us, p.damaged) gets
// no tail, so the next Open rebuilds it.
func (p *Projector) tailOf(v string, n int64) error {
	return p.sumOf(p.tails, readTail, v, n)
}

// crcOf makes p.crcs[v] the whole-view CRC of v at size n: kept when
// writes carried it there, else read back from the file (flushed). A file
// shorter than n gets none, so the next Open rebuilds it.
func (p *Projector) crcOf(v string, n int64) error {
	return p.sumOf(p.crcs, readCRC, v, n)
}

// sumOf makes sums[v] read's checksum of v's first n bytes, unless sums
// already holds it at that size; v's open file is read when there is one.
// A missing file, or one shorter than n, gets no entry.
func (p *Projector) sumOf(sums map[string]viewTail, read func(io.ReaderAt, int64) (uint32, error), v string, n int64) error {
	if t, ok := sums[v]; ok && t.size == n {
		return nil
	}
	delete(sums, v)
	var r io.ReaderAt
	if vf, ok := p.open[v]; ok {
		r = vf.f
	} else {
		f, err := os.Open(p.path(v))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	crc, err := read(r, n)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	sums[v] = viewTail{size: n, crc: crc}
	return nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|noFollow, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Close checkpoints and closes every view file. Closing twice is a no-op.
func (p *Projector) Close() error { return p.close(true) }

// CloseNoCheckpoint flushes and closes the view files without writing a
// checkpoint (the log failed: the views must not claim more than it holds).
func (p *Projector) CloseNoCheckpoint() error { return p.close(false) }

func (p *Projector) close(checkpoint bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	var err error
	if checkpoint && p.failed == nil {
		if err = p.checkpoint(); errors.Is(err, ErrIngestPending) {
			err = nil // the next open finds those lines again
		}
	}
	for v, vf := range p.open {
		if cerr := p.closeView(v, vf); err == nil {
			err = cerr
		}
	}
	p.closed = true
	return err
}

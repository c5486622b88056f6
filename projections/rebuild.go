package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// RebuildOptions configure Rebuild.
type RebuildOptions struct {
	// UpTo is the last sequence to project; 0 means every event of src.
	UpTo uint64
	// NoSync skips fsync of the rebuilt views (a throw-away rebuild).
	NoSync bool
	// Progress, when set, is called after each batch with the sequence of
	// the last projected event and the number of events projected so far.
	Progress func(lastSeq uint64, done int)
}

// RebuildResult describes a finished rebuild.
type RebuildResult struct {
	Events  int    // events projected
	LastSeq uint64 // last sequence projected, 0 for none
	Skipped uint64 // events that could not be projected (see doc.go)
}

const rebuildBatch = 512

// Rebuild writes every view of dst from the events of src (in log order)
// up to opts.UpTo: the views dst had are removed first, the new ones are
// written from empty, and a checkpoint of the result is written. The bytes
// depend only on the events. dst must not be a home a daemon serves.
func Rebuild(ctx context.Context, src iter.Seq2[*events.Event, error], dst home.Home, opts RebuildOptions) (RebuildResult, error) {
	var res RebuildResult
	if err := ClearViews(dst); err != nil {
		return res, err
	}
	p, err := Open(Options{Home: dst, Fresh: true, Exclusive: true, NoSync: opts.NoSync})
	if err != nil {
		return res, err
	}
	runErr := pipeline(ctx, src, opts.UpTo, func(b *renderBatch) error {
		if err := p.applyBatch(b.evs, b.rs, b.errs); err != nil {
			return err
		}
		res.Events += len(b.evs)
		res.LastSeq = b.evs[len(b.evs)-1].Seq
		if opts.Progress != nil {
			opts.Progress(res.LastSeq, res.Events)
		}
		return ctx.Err()
	})
	res.Skipped = p.Skipped()
	if runErr != nil {
		p.CloseNoCheckpoint()
		return res, fmt.Errorf("projections: rebuild: %w", runErr)
	}
	if err := p.Close(); err != nil {
		return res, fmt.Errorf("projections: rebuild: %w", err)
	}
	return res, nil
}

// renderBatch is a run of consecutive events and their renderings.
type renderBatch struct {
	arena *arena // holds the lines of rs; recycled once the batch is applied
	evs   []*events.Event
	rs    []rendered
	errs  []error
	done  chan struct{}
}

// arenas recycles the line arenas of rendered batches.
var arenas = sync.Pool{New: func() any { return new(arena) }}

// pipeline reads src on the calling goroutine, renders batches on
// GOMAXPROCS workers (render is a pure function of the event) and hands
// them to apply in log order on one more goroutine. Batches (their event,
// rendering and error slices, the write lists inside the renderings) are
// recycled through a free list once applied, so a long rebuild allocates
// them once.
func pipeline(ctx context.Context, src iter.Seq2[*events.Event, error], upTo uint64, apply func(*renderBatch) error) error {
	workers := max(1, runtime.GOMAXPROCS(0))
	jobs := make(chan *renderBatch, workers*2)
	ordered := make(chan *renderBatch, workers*4)
	// Every batch in flight is in jobs, ordered, a worker, the applier or
	// the reader: free can hold them all, so recycling never blocks.
	free := make(chan *renderBatch, workers*8+4)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range jobs {
				for i, ev := range b.evs {
					b.rs[i].a = b.arena
					b.errs[i] = render(ev, &b.rs[i])
				}
				close(b.done)
			}
		}()
	}
	applyErr := make(chan error, 1)
	go func() {
		var err error
		for b := range ordered {
			<-b.done
			if err == nil {
				err = apply(b)
			}
			b.arena.reset()
			arenas.Put(b.arena)
			b.arena = nil
			clear(b.evs[:cap(b.evs)]) // drop the events, keep the slices
			b.evs = b.evs[:0]
			select {
			case free <- b:
			default:
			}
		}
		applyErr <- err
	}()
	var readErr error
	newBatch := func() *renderBatch {
		select {
		case b := <-free:
			b.done = make(chan struct{})
			return b
		default:
		}
		return &renderBatch{
			evs:  make([]*events.Event, 0, rebuildBatch),
			rs:   make([]rendered, rebuildBatch),
			errs: make([]error, rebuildBatch),
			done: make(chan struct{}),
		}
	}
	send := func(b *renderBatch) {
		b.arena = arenas.Get().(*arena)
		b.rs = b.rs[:len(b.evs)]
		b.errs = b.errs[:len(b.evs)]
		ordered <- b
		jobs <- b
	}
	b := newBatch()
	for ev, err := range src {
		if err != nil {
			readErr = err
			break
		}
		if upTo != 0 && ev.Seq > upTo {
			break
		}
		b.evs = append(b.evs, ev)
		if len(b.evs) == rebuildBatch {
			send(b)
			b = newBatch()
			if err := ctx.Err(); err != nil {
				readErr = err
				break
			}
		}
	}
	if len(b.evs) > 0 && readErr == nil {
		send(b)
	}
	close(jobs)
	close(ordered)
	wg.Wait()
	if err := <-applyErr; err != nil {
		return err
	}
	return readErr
}

// viewRoots are the home-relative places views live; lab/exports is not a
// view (exports are written on request).
var viewRoots = []string{"feedback", "lab", "pty", "steps"}

// ClearViews removes every view file of h and its checkpoint (with the
// sealed views' records it vouches for); the log,
// the state files and lab/exports are left alone.
func ClearViews(h home.Home) error { return clearViews(h, false) }

// ClearDerivedViews is ClearViews keeping feedback/feedback.jsonl, which
// may hold lines of other programs not yet ingested (an in-place rebuild
// re-verifies it instead).
func ClearDerivedViews(h home.Home) error { return clearViews(h, true) }

func clearViews(h home.Home, keepFeedback bool) error {
	views, err := ViewFiles(h)
	if err != nil {
		return err
	}
	for _, v := range views {
		if keepFeedback && v == FeedbackView {
			continue
		}
		if err := os.Remove(filepath.Join(h.Dir, filepath.FromSlash(v))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, d := range []string{"lab/sessions", "pty"} {
		if err := os.RemoveAll(filepath.Join(h.Dir, filepath.FromSlash(d))); err != nil {
			return err
		}
	}
	for _, f := range []string{h.CheckpointFile(), filepath.Join(h.Dir, filepath.FromSlash(SealedViewsFile))} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// ViewFiles lists the view files of h, home-relative with forward slashes,
// sorted. Hidden files and lab/exports are skipped.
func ViewFiles(h home.Home) ([]string, error) {
	var out []string
	for _, root := range viewRoots {
		err := filepath.WalkDir(filepath.Join(h.Dir, root), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			rel := h.Rel(p)
			if rel == "lab/exports" || (strings.HasPrefix(d.Name(), ".") && p != filepath.Join(h.Dir, root)) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() {
				out = append(out, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}

// Difference is the first place where two homes' views differ.
type Difference struct {
	File   string // home-relative view file
	Offset int64  // first differing byte; the shorter size when one is a prefix
	Line   int    // the line (1-based) of the live file holding Offset
	Detail string // e.g. "missing in rebuilt", "sizes 120 and 80"
}

func (d *Difference) String() string {
	return fmt.Sprintf("%s differs at line %d, offset %d (%s)", d.File, d.Line, d.Offset, d.Detail)
}

// viewFilesOf lists the view files of a and of b (ViewFiles).
func viewFilesOf(a, b home.Home) (va, vb []string, err error) {
	if va, err = ViewFiles(a); err == nil {
		vb, err = ViewFiles(b)
	}
	return va, vb, err
}

// Compare compares the views of live and rebuilt byte for byte and returns
// the first difference in file-name order, or nil when they are identical.
// An unfinished last line of live's feedback.jsonl (no '\n') is not yet
// part of the store and is ignored.
func Compare(live, rebuilt home.Home) (*Difference, error) {
	a, b, err := viewFilesOf(live, rebuilt)
	if err != nil {
		return nil, err
	}
	all := append(a, b...)
	slices.Sort(all)
	for _, n := range slices.Compact(all) {
		d, err := compareFile(live, rebuilt, n)
		if err != nil {
			return nil, err
		}
		if d != nil {
			return d, nil
		}
	}
	return nil, nil
}

func compareFile(live, rebuilt home.Home, name string) (*Difference, error) {
	la, errA := os.ReadFile(filepath.Join(live.Dir, filepath.FromSlash(name)))
	lb, errB := os.ReadFile(filepath.Join(rebuilt.Dir, filepath.FromSlash(name)))
	switch {
	case errA != nil && !errors.Is(errA, fs.ErrNotExist):
		return nil, errA
	case errB != nil && !errors.Is(errB, fs.ErrNotExist):
		return nil, errB
	}
	if name == FeedbackView && errA == nil {
		if i := bytes.LastIndexByte(la, '\n'); i+1 < len(la) {
			la = la[:i+1]
		}
	}
	switch {
	case errA != nil && errB != nil:
		return nil, nil
	case errA != nil:
		if len(lb) == 0 {
			return nil, nil
		}
		return &Difference{File: name, Offset: 0, Line: 1, Detail: "missing in the live home"}, nil
	case errB != nil:
		if len(la) == 0 {
			return nil, nil
		}
		return &Difference{File: name, Offset: 0, Line: 1, Detail: "not produced by the rebuild"}, nil
	}
	n := min(len(la), len(lb))
	for i := 0; i < n; i++ {
		if la[i] != lb[i] {
			return &Difference{File: name, Offset: int64(i), Line: bytes.Count(la[:i], []byte("\n")) + 1, Detail: fmt.Sprintf("byte %q live, %q rebuilt", la[i], lb[i])}, nil
		}
	}
	if len(la) != len(lb) {
		return &Difference{File: name, Offset: int64(n), Line: bytes.Count(la[:n], []byte("\n")) + 1, Detail: fmt.Sprintf("live has %d bytes, rebuilt %d", len(la), len(lb))}, nil
	}
	return nil, nil
}

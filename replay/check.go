package replay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// CheckOptions configure Check.
type CheckOptions struct {
	// Home is the live home.
	Home home.Home
	// Shadow is an empty directory to re-project into; Check removes what it
	// creates there. Default: a temporary directory.
	Shadow string
	// From, when > 1, ignores bytes produced by events before it: each view
	// is compared from the size it had right after event From-1.
	From uint64
	// LagWait bounds how long Check waits for live views that are a strict
	// prefix of their shadow to catch up (a daemon appending meanwhile);
	// default DefaultLagWait, negative: do not wait.
	LagWait time.Duration
	// Progress, when set, is called after each projected batch with the
	// pass (1: compare, 2: find the events behind differences), the last
	// projected sequence and the log's last sequence.
	Progress func(pass int, seq, last uint64)
	// Projector builds the shadow views; default the production projector
	// without fsync. A custom projector must have written an event's bytes
	// to its files when Apply returns (the divergence search watches sizes).
	Projector ProjectorFactory
	// Archive, when set, is where the archived segments of a compacted log
	// are (see OpenLogArchive).
	Archive string
}

// Divergence is one view file that differs from its re-projection.
type Divergence struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	// Seq is the event that produced the shadow's bytes at Offset; 0 when
	// the live file has bytes there that no event accounts for.
	Seq   uint64        `json:"seq"`
	Event *events.Event `json:"-"`
	// Produced is Event rendered for JSON output.
	Produced   *Rendered `json:"event,omitempty"`
	LiveSize   int64     `json:"liveSize"`   // -1: missing
	ShadowSize int64     `json:"shadowSize"` // -1: missing
	Live       string    `json:"live"`       // bytes of the live file from Offset
	Shadow     string    `json:"shadow"`     // bytes of the shadow file from Offset
}

// CheckReport is the outcome of Check.
type CheckReport struct {
	Identical bool   `json:"identical"`
	LastSeq   uint64 `json:"lastSeq"`
	Events    int    `json:"events"`
	Files     int    `json:"files"`
	// First is the divergence produced by the earliest event (nil when identical).
	First *Divergence `json:"first,omitempty"`
	// All lists every diverging file, earliest event first.
	All []Divergence `json:"divergences,omitempty"`
}

// contextBytes is how many bytes of each side a Divergence quotes.
const contextBytes = 48

// Check re-projects the log into a shadow home and compares every view
// with the live one. The log is read up to its end as Check starts; if a
// daemon appends meanwhile, live files that only grew past the shadow are
// not counted as differences.
func Check(ctx context.Context, opts CheckOptions) (*CheckReport, error) {
	// The production projector may buffer its writes in the first pass
	// unless sizes are sampled after event From-1; the second pass watches
	// file sizes after each event, so it must not.
	pass1, pass2 := opts.Projector, opts.Projector
	if opts.Projector == nil {
		pass1, pass2 = shadowProjector(opts.From <= 1), shadowProjector(false)
	}
	shadowRoot := opts.Shadow
	if shadowRoot == "" {
		d, err := os.MkdirTemp("", "cmlab-shadow-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		shadowRoot = d
	}
	log, err := OpenLogArchive(opts.Home.WALDir(), opts.Archive)
	if err != nil {
		return nil, err
	}
	last, err := log.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	if opts.From > last {
		return nil, fmt.Errorf("replay: --from %d is past the end of the log (seq %d)", opts.From, last)
	}
	shadow := home.Home{Dir: filepath.Join(shadowRoot, "shadow")}
	if err := os.RemoveAll(shadow.Dir); err != nil {
		return nil, err
	}
	defer os.RemoveAll(shadow.Dir)
	rep := &CheckReport{LastSeq: last}
	base := map[string]int64{}
	progress := func(pass int) func(uint64) {
		if opts.Progress == nil {
			return nil
		}
		return func(seq uint64) { opts.Progress(pass, seq, last) }
	}
	err = project(ctx, log, shadow, last, pass1, progress(1), func(ev *events.Event) (bool, error) {
		rep.Events++
		if opts.From > 1 && ev.Seq == opts.From-1 {
			return true, nil // sample sizes after this event
		}
		return false, nil
	}, func(*events.Event) error {
		files, err := projections.ViewFiles(shadow)
		if err != nil {
			return err
		}
		for _, f := range files {
			if base[f], err = fileSize(shadow, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	grown := func() bool {
		now, err := log.LastSeq(ctx)
		return err == nil && now > last
	}
	divs, nfiles, err := compareHomes(opts.Home, shadow, base, grown)
	if err != nil {
		return nil, err
	}
	rep.Files = nfiles
	if divs, err = awaitLagging(ctx, opts, shadow, base, grown, divs); err != nil {
		return nil, err
	}
	if len(divs) == 0 {
		rep.Identical = true
		return rep, nil
	}
	// Second pass: find, per diverging file, the event whose output covers
	// the diverging offset.
	shadow2 := home.Home{Dir: filepath.Join(shadowRoot, "trace")}
	if err := os.RemoveAll(shadow2.Dir); err != nil {
		return nil, err
	}
	defer os.RemoveAll(shadow2.Dir)
	pending := map[int]bool{}
	for i, d := range divs {
		if d.ShadowSize > d.Offset {
			pending[i] = true
		}
	}
	err = project(ctx, log, shadow2, last, pass2, progress(2), func(*events.Event) (bool, error) {
		return len(pending) > 0, nil
	}, func(ev *events.Event) error {
		for i := range pending {
			sz, err := fileSize(shadow2, divs[i].File)
			if err != nil {
				return err
			}
			if sz > divs[i].Offset {
				r := Render(ev)
				divs[i].Seq, divs[i].Event, divs[i].Produced = ev.Seq, ev, &r
				delete(pending, i)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(divs, func(i, j int) bool {
		a, b := divs[i].Seq, divs[j].Seq
		if (a == 0) != (b == 0) {
			return b == 0
		}
		return a < b
	})
	rep.All = divs
	rep.First = &rep.All[0]
	return rep, nil
}

// project applies the log up to last into an empty home h, one event at a
// time when single(ev) says so (after which after(ev) runs), else in batches.
func project(ctx context.Context, log *Log, h home.Home, last uint64, newP ProjectorFactory, progress func(uint64),
	single func(*events.Event) (bool, error), after func(*events.Event) error) error {
	if err := h.Ensure(); err != nil {
		return err
	}
	p, err := newP(h)
	if err != nil {
		return err
	}
	var batch []*events.Event
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := p.Apply(batch)
		if err != nil {
			err = fmt.Errorf("replay: project seq %d–%d: %w", batch[0].Seq, batch[len(batch)-1].Seq, err)
		} else if progress != nil {
			progress(batch[len(batch)-1].Seq)
		}
		batch = batch[:0]
		return err
	}
	run := func() error {
		if last == 0 {
			return nil
		}
		for ev, err := range log.Events(ctx, 1, last) {
			if err != nil {
				return err
			}
			one, err := single(ev)
			if err != nil {
				return err
			}
			batch = append(batch, ev)
			if one {
				if err := flush(); err != nil {
					return err
				}
				if err := after(ev); err != nil {
					return err
				}
				continue
			}
			if len(batch) == batchSize {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	}
	err = run()
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return err
}

// lagging reports whether d may be a live view that has not caught up yet:
// the live file matches the shadow up to its end and the shadow is longer.
func lagging(d Divergence) bool { return d.Offset >= d.LiveSize && d.ShadowSize > d.Offset }

// awaitLagging compares lagging files again until they match or LagWait
// passes. A daemon writes an entry to the log before it projects it, so
// the shadow can be a few events ahead of the live views it is compared with.
func awaitLagging(ctx context.Context, opts CheckOptions, shadow home.Home, base map[string]int64, grown func() bool, divs []Divergence) ([]Divergence, error) {
	wait := opts.LagWait
	if wait == 0 {
		wait = DefaultLagWait
	}
	if wait < 0 || !slices.ContainsFunc(divs, lagging) {
		return divs, nil
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(lagPoll)
	defer tick.Stop()
	for slices.ContainsFunc(divs, lagging) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		kept := divs[:0]
		for _, d := range divs {
			if lagging(d) {
				nd, err := compareFile(opts.Home, shadow, d.File, base[d.File])
				if err != nil {
					return nil, err
				}
				if nd == nil || extends(*nd, grown) {
					continue
				}
				d = *nd
			}
			kept = append(kept, d)
		}
		divs = kept
	}
	return divs, nil
}

// Waiting for lagging live views (see CheckOptions.LagWait).
const (
	DefaultLagWait = 2 * time.Second
	lagPoll        = 20 * time.Millisecond
)

// extends reports whether d is a live file that only extends the shadow's
// while the log has grown past what the shadow projected.
func extends(d Divergence, grown func() bool) bool {
	return d.ShadowSize >= 0 && d.Offset == d.ShadowSize && d.LiveSize > d.ShadowSize && grown()
}

// compareHomes compares the view files of live and shadow; base gives, per
// file, the offset to compare from. A live file that only extends the
// shadow's, while the log has grown, is not a difference.
func compareHomes(live, shadow home.Home, base map[string]int64, grown func() bool) ([]Divergence, int, error) {
	lf, err := projections.ViewFiles(live)
	if err != nil {
		return nil, 0, err
	}
	sf, err := projections.ViewFiles(shadow)
	if err != nil {
		return nil, 0, err
	}
	union := map[string]bool{}
	for _, f := range append(lf, sf...) {
		union[f] = true
	}
	names := make([]string, 0, len(union))
	for f := range union {
		names = append(names, f)
	}
	sort.Strings(names)
	var divs []Divergence
	for _, f := range names {
		d, err := compareFile(live, shadow, f, base[f])
		if err != nil {
			return nil, 0, err
		}
		if d == nil {
			continue
		}
		if extends(*d, grown) {
			continue
		}
		divs = append(divs, *d)
	}
	return divs, len(names), nil
}

// compareFile returns the first difference of rel at or after from, or nil.
func compareFile(live, shadow home.Home, rel string, from int64) (*Divergence, error) {
	lp := filepath.Join(live.Dir, filepath.FromSlash(rel))
	sp := filepath.Join(shadow.Dir, filepath.FromSlash(rel))
	ls, err := fileSize(live, rel)
	if err != nil {
		return nil, err
	}
	ss, err := fileSize(shadow, rel)
	if err != nil {
		return nil, err
	}
	d := &Divergence{File: rel, LiveSize: ls, ShadowSize: ss}
	if ls < 0 || ss < 0 {
		if max(ls, ss) <= from {
			return nil, nil // an empty file on one side, none on the other
		}
		d.Offset = from
	} else {
		off, same, err := firstDiff(lp, sp, from)
		if err != nil {
			return nil, err
		}
		if same {
			return nil, nil
		}
		d.Offset = off
	}
	d.Live = quote(lp, d.Offset)
	d.Shadow = quote(sp, d.Offset)
	return d, nil
}

// firstDiff compares two files from offset from.
func firstDiff(a, b string, from int64) (int64, bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return 0, false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return 0, false, err
	}
	defer fb.Close()
	if _, err := fa.Seek(from, io.SeekStart); err != nil {
		return 0, false, err
	}
	if _, err := fb.Seek(from, io.SeekStart); err != nil {
		return 0, false, err
	}
	ra, rb := bufio.NewReaderSize(fa, 64<<10), bufio.NewReaderSize(fb, 64<<10)
	bufA, bufB := make([]byte, 32<<10), make([]byte, 32<<10)
	off := from
	for {
		na, ea := io.ReadFull(ra, bufA)
		nb, eb := io.ReadFull(rb, bufB)
		n := min(na, nb)
		if i := mismatch(bufA[:n], bufB[:n]); i >= 0 {
			return off + int64(i), false, nil
		}
		if na != nb {
			return off + int64(n), false, nil
		}
		off += int64(n)
		endA := errors.Is(ea, io.EOF) || errors.Is(ea, io.ErrUnexpectedEOF)
		endB := errors.Is(eb, io.EOF) || errors.Is(eb, io.ErrUnexpectedEOF)
		if ea != nil && !endA {
			return 0, false, ea
		}
		if eb != nil && !endB {
			return 0, false, eb
		}
		if endA || endB {
			return off, endA && endB, nil
		}
	}
}

func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// quote returns up to contextBytes of the file starting at off ("" when missing or past the end).
func quote(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "" // missing: the sizes in the Divergence say so
	}
	defer f.Close()
	buf := make([]byte, contextBytes)
	n, _ := f.ReadAt(buf, off)
	return string(buf[:n])
}

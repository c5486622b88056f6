package projections

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/cmlab/cmlab/home"
)

// Sealed views: a terminal block's output view (pty/<c>/blocks/<b>.out)
// is written only by the output events of that block (pty.output and
// pty.truncated with its block id), which the terminal emits only between
// the block's pty.block.begin and its pty.block.end; nothing else writes,
// cuts or removes it (retention and compaction leave views alone), so
// once the block has ended its file never changes again. Listing every
// such view in state/checkpoint.json made the checkpoint, its rewrite at
// every checkpoint and the tail check of every view at open grow with the
// number of blocks ever run. Instead, the output view of a block that
// ended, or that no event has written for Options.SealAfter events, is
// sealed at the next checkpoint: its
// entry moves from the checkpoint to state/sealed-views.jsonl, an
// append-only file of one record per line,
//
//	{"view":"pty/<c>/blocks/<b>.out","size":16000,"tail":3735928559,"crc":2882400001}
//
// (size, tail checksum and whole-view CRC-32C exactly as the checkpoint
// would hold them), and the checkpoint vouches for the file once
// (Checkpoint.Sealed: its record count, size, tail checksum and CRC-32C).
// Records are appended and fsynced before the checkpoint that counts them
// is written, so a crash in between leaves records past the counted size,
// which Open cuts (the old checkpoint still lists those views).
//
// Open checks the file's tail against the checkpoint and trusts the
// sealed views without opening them; with Options.DeferWholeCheck the
// file and every view it lists are read after open (VerifySealed), else
// Open reads them all, as it reads every other view. A view listed in both
// the checkpoint and the file (written again after it was sealed) is the
// checkpoint's; views are append-only, so a record's size and CRC stay
// true of the file's first bytes. A record is looked up only when a sealed
// view is written again (sealedRecord), which reads the file through.

// SealedViewsFile is the home-relative path of the sealed views' records.
const SealedViewsFile = "state/sealed-views.jsonl"

// DefaultSealAfter is the Options.SealAfter the engine uses: a block
// output view not written for this many events is sealed.
const DefaultSealAfter = 1000

// SealedViews is the checkpoint's record of state/sealed-views.jsonl:
// Count records in its first Size bytes, whose last min(Size, TailBytes)
// bytes have CRC-32C Tail and all of which have CRC-32C CRC.
type SealedViews struct {
	Count int64  `json:"count"`
	Size  int64  `json:"size"`
	Tail  uint32 `json:"tail"`
	CRC   uint32 `json:"crc"`
}

// sealedRecord is one line of state/sealed-views.jsonl.
type sealedRecord struct {
	View string `json:"view"`
	Size int64  `json:"size"`
	Tail uint32 `json:"tail"`
	CRC  uint32 `json:"crc"`
}

// sealable reports whether view may be sealed: a terminal block's output.
func sealable(view string) bool {
	ok, _ := path.Match("pty/*/blocks/*.out", view)
	return ok
}

func (p *Projector) sealedPath() string { return p.path(SealedViewsFile) }

// openSealed checks state/sealed-views.jsonl against the checkpoint's
// record sv (nil: no view sealed) and cuts records a crash left past it.
// ok false: the file does not hold what sv vouches for (missing, short,
// its tail or, unless the check is deferred, its CRC differs).
func (p *Projector) openSealed(sv *SealedViews) (ok bool, err error) {
	mp := p.sealedPath()
	if _, err := dropNonRegular(mp); err != nil {
		return false, err
	}
	fi, err := os.Stat(mp)
	if sv == nil || sv.Size == 0 {
		if err == nil && fi.Size() > 0 {
			// Records no checkpoint counts (a regeneration's checkpoint
			// starts afresh): the next seal writes the file anew.
			if err := os.Truncate(mp, 0); err != nil {
				return false, fmt.Errorf("projections: empty %s: %w", SealedViewsFile, err)
			}
		}
		return true, nil
	}
	if err != nil || fi.Size() < sv.Size {
		return false, nil
	}
	f, err := os.Open(mp)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if tail, err := readTail(f, sv.Size); err != nil || tail != sv.Tail {
		return false, nil
	}
	if !p.opts.DeferWholeCheck {
		if crc, err := readCRC(f, sv.Size); err != nil || crc != sv.CRC {
			return false, nil
		}
	}
	if fi.Size() > sv.Size {
		if err := os.Truncate(mp, sv.Size); err != nil {
			return false, fmt.Errorf("projections: cut %s back to %d: %w", SealedViewsFile, sv.Size, err)
		}
	}
	p.sealed = *sv
	return true, nil
}

// eachSealed calls fn with every record in the first size bytes of h's
// state/sealed-views.jsonl, in file order, and returns the CRC-32C of
// those bytes. A record that does not decode, or names no sealable view,
// is an error (skipped when lenient); so is a file shorter than size.
func eachSealed(ctx context.Context, h home.Home, size int64, lenient bool, fn func(sealedRecord) error) (uint32, error) {
	f, err := os.Open(filepath.Join(h.Dir, filepath.FromSlash(SealedViewsFile)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.LimitReader(f, size), 64<<10)
	var crc uint32
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return 0, fmt.Errorf("%s: a record at %d is too long", SealedViewsFile, n)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: short at %d of %d bytes: %w", SealedViewsFile, n, size, err)
		}
		crc = crc32.Update(crc, castagnoli, line)
		n += int64(len(line))
		var rec sealedRecord
		if err := json.Unmarshal(line, &rec); err != nil || !sealable(rec.View) || !validViewPath(rec.View) || rec.Size <= 0 {
			if lenient {
				continue
			}
			return 0, fmt.Errorf("%s: a bad record at %d", SealedViewsFile, n-int64(len(line)))
		}
		if err := fn(rec); err != nil {
			return 0, err
		}
	}
	return crc, nil
}

// checkSealed is Open's check of every sealed view when the whole check is
// not deferred: a view the checkpoint also lists is the checkpoint's; any
// other is checked as a checkpointed view is (regular file, size, tail,
// whole CRC), cut back to its size when longer, and emptied and rebuilt
// from the log (p.rebuilding) when it fails. ok false: the file is damaged
// (a record does not decode), the caller distrusts the checkpoint.
func (p *Projector) checkSealed(cp *Checkpoint) (allIntact, ok bool, err error) {
	if p.sealed.Count == 0 {
		return true, true, nil
	}
	last := map[string]sealedRecord{}
	if _, err := eachSealed(context.Background(), p.opts.Home, p.sealed.Size, false, func(r sealedRecord) error {
		last[r.View] = r
		return nil
	}); err != nil {
		return false, false, nil
	}
	allIntact = true
	for v, r := range last {
		if _, listed := cp.Views[v]; listed {
			continue
		}
		intact, err := p.checkView(v, r)
		if err != nil {
			return false, false, err
		}
		if !intact {
			allIntact = false
			p.rebuilding[v] = true
		}
	}
	return allIntact, true, nil
}

// checkView checks sealed view v against its record r, cuts it back to
// r.Size when longer, and empties it when it does not hold r.
func (p *Projector) checkView(v string, r sealedRecord) (bool, error) {
	vp := p.path(v)
	if _, err := dropNonRegular(vp); err != nil {
		return false, err
	}
	fi, err := os.Stat(vp)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projections: stat %s: %w", v, err)
	}
	intact := fi.Size() >= r.Size
	if intact {
		f, err := os.Open(vp)
		if err != nil {
			return false, err
		}
		tail, terr := readTail(f, r.Size)
		crc, cerr := readCRC(f, r.Size)
		f.Close()
		intact = terr == nil && cerr == nil && tail == r.Tail && crc == r.CRC
	}
	switch {
	case !intact:
		if err := os.Truncate(vp, 0); err != nil {
			return false, fmt.Errorf("projections: empty %s: %w", v, err)
		}
	case fi.Size() > r.Size:
		if err := os.Truncate(vp, r.Size); err != nil {
			return false, fmt.Errorf("projections: cut %s back to %d: %w", v, r.Size, err)
		}
	}
	return intact, nil
}

// sealedSkip reports whether a catch-up write of an event the checkpoint
// covers to view skips it: a sealed view that Open trusted already holds
// it. A view the checkpoint lists, or one being rebuilt, is not skipped
// here (p.intact decides for those).
func (p *Projector) sealedSkip(view string) bool {
	if p.sealed.Count == 0 || p.rebuilding[view] || !sealable(view) {
		return false
	}
	_, known := p.sizes[view]
	return !known
}

// sealedRecord returns the last record of sealed view v. It reads
// state/sealed-views.jsonl through, decoding only the lines that name v,
// each time it is asked (memory does not grow with the number of sealed
// views): a sealed view is written again only when a block's output
// resumes after the block went quiet for SealAfter events, or, once,
// after an upgrade sealed a block still open. Lenient: with the whole
// check deferred, a damaged record is VerifySealed's to find (the views
// are then regenerated); a view it does not name is written as new
// meanwhile.
func (p *Projector) sealedRecord(v string) (sealedRecord, bool, error) {
	if p.sealed.Count == 0 || p.rebuilding[v] || !sealable(v) {
		return sealedRecord{}, false, nil
	}
	name, err := json.Marshal(v)
	if err != nil {
		return sealedRecord{}, false, err
	}
	needle := append([]byte(`"view":`), name...)
	f, err := os.Open(p.sealedPath())
	if err != nil {
		return sealedRecord{}, false, fmt.Errorf("projections: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.LimitReader(f, p.sealed.Size), 64<<10)
	var found sealedRecord
	ok := false
	for {
		line, err := r.ReadSlice('\n')
		if bytes.Contains(line, needle) {
			var rec sealedRecord
			if json.Unmarshal(line, &rec) == nil && rec.View == v && rec.Size > 0 {
				found, ok = rec, true
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a damaged record: VerifySealed names it
		}
		if err != nil {
			break
		}
	}
	return found, ok, nil
}

// seal moves the block output views not written for Options.SealAfter
// events from p.sizes to state/sealed-views.jsonl (see above); views are
// flushed and fsynced already, their tails and CRCs known at their sizes.
func (p *Projector) seal() error {
	if p.opts.SealAfter == 0 {
		return nil
	}
	var recs []sealedRecord
	var buf []byte
	for v, n := range p.sizes {
		if n <= 0 || !sealable(v) || p.damaged[v] {
			continue
		}
		last := p.lastWrite[v]
		if vf, ok := p.open[v]; ok {
			last = max(last, vf.lastSeq)
		}
		if !p.ended[v] && (p.last < p.opts.SealAfter || last+p.opts.SealAfter > p.last) {
			continue
		}
		t, tok := p.tails[v]
		c, cok := p.crcs[v]
		if !tok || !cok || t.size != n || c.size != n {
			continue
		}
		r := sealedRecord{View: v, Size: n, Tail: t.crc, CRC: c.crc}
		b, err := json.Marshal(&r)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil
	}
	mp := p.sealedPath()
	created := p.sealed.Size == 0
	if created {
		if err := os.MkdirAll(filepath.Dir(mp), home.DirPerm); err != nil {
			return err
		}
	}
	if _, err := dropNonRegular(mp); err != nil {
		return err
	}
	f, err := os.OpenFile(mp, os.O_RDWR|os.O_CREATE|noFollow, home.FilePerm)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(p.sealed.Size); err != nil {
		return err
	}
	if _, err := f.WriteAt(buf, p.sealed.Size); err != nil {
		return err
	}
	size := p.sealed.Size + int64(len(buf))
	tail, err := readTail(f, size)
	if err != nil {
		return err
	}
	if !p.opts.NoSync {
		if err := f.Sync(); err != nil {
			return err
		}
		if created {
			if err := home.SyncDir(filepath.Dir(mp)); err != nil {
				return err
			}
		}
	}
	p.sealed = SealedViews{
		Count: p.sealed.Count + int64(len(recs)),
		Size:  size,
		Tail:  tail,
		CRC:   crc32.Update(p.sealed.CRC, castagnoli, buf),
	}
	for _, r := range recs {
		if vf, ok := p.open[r.View]; ok {
			if err := p.closeView(r.View, vf); err != nil {
				return err
			}
		}
		delete(p.sizes, r.View)
		delete(p.tails, r.View)
		delete(p.crcs, r.View)
		delete(p.lastWrite, r.View)
		delete(p.ended, r.View)
		delete(p.intact, r.View)
	}
	return nil
}

// SealedCheck is the whole check of state/sealed-views.jsonl and of every
// view it lists that Open deferred (Options.DeferWholeCheck): its first
// Size bytes must have CRC, each record's view its size and CRC.
type SealedCheck struct {
	Size int64
	CRC  uint32
}

// UnverifiedSealed is the sealed views' check Open deferred; ok false when
// there is none (nothing sealed, or Open read them all).
func (p *Projector) UnverifiedSealed() (SealedCheck, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unverifiedSealed, p.unverifiedSealed.Size > 0
}

// VerifySealed reads h's state/sealed-views.jsonl up to c.Size and every
// view it lists, one at a time (memory does not grow with their number),
// and returns those that are not a regular file holding the record's
// first Size bytes (CRC) and nothing after them, with the file itself
// first when its bytes do not have c.CRC or a record does not decode.
// A view may run past its record when a later record of the same view
// supersedes it, or when holds (the running projector's Holds; nil: none)
// says the view was written again since it was sealed. views and bytes
// count what was read. Sealed views never shrink, so a projector may
// write them meanwhile. It stops with ctx's error.
func VerifySealed(ctx context.Context, h home.Home, c SealedCheck, holds func(view string) bool) (damaged []ViewCheck, views int, bytes int64, err error) {
	self := ViewCheck{View: SealedViewsFile, Size: c.Size, CRC: c.CRC}
	buf := make([]byte, 1<<20)
	longer := map[string]ViewCheck{} // views past their record: damage unless superseded or held
	crc, err := eachSealed(ctx, h, c.Size, false, func(r sealedRecord) error {
		views++
		bytes += r.Size
		delete(longer, r.View)
		ok, past, err := sealedHolds(ctx, h, r, buf)
		if err != nil {
			return err
		}
		vc := ViewCheck{View: r.View, Size: r.Size, CRC: r.CRC}
		switch {
		case !ok:
			damaged = append(damaged, vc)
		case past:
			longer[r.View] = vc
		}
		return nil
	})
	if ctx.Err() != nil {
		return damaged, views, bytes, ctx.Err()
	}
	for _, vc := range longer {
		if holds == nil || !holds(vc.View) {
			damaged = append(damaged, vc)
		}
	}
	if err != nil || crc != c.CRC {
		damaged = append([]ViewCheck{self}, damaged...)
	}
	return damaged, views, bytes, nil
}

// sealedHolds reports whether the view of r is a regular file whose first
// r.Size bytes have CRC r.CRC, and whether it runs past them.
func sealedHolds(ctx context.Context, h home.Home, r sealedRecord, buf []byte) (ok, past bool, err error) {
	vp := filepath.Join(h.Dir, filepath.FromSlash(r.View))
	fi, err := os.Lstat(vp)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < r.Size {
		return false, false, nil
	}
	f, err := os.OpenFile(vp, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return false, false, nil
	}
	defer f.Close()
	var crc uint32
	for off := int64(0); off < r.Size; {
		if err := ctx.Err(); err != nil {
			return false, false, err
		}
		n := min(int64(len(buf)), r.Size-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false, false, nil
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += n
	}
	return crc == r.CRC, fi.Size() > r.Size, nil
}

// Holds reports whether the projector holds view as written (listed in
// its next checkpoint): for VerifySealed, a sealed view written again.
func (p *Projector) Holds(view string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.sizes[view]
	return ok
}

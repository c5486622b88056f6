package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/home"
	"golang.org/x/sys/unix"
)

// Compaction removes whole segments from the front of the log: every
// segment whose entries all lie before a sequence the caller no longer
// needs (package compact decides which), never the tail segment. Removed
// segments are moved to an archive directory or deleted. tidwall/wal's
// TruncateFront is not used: it rewrites the segment holding the new
// first index through a <seq>.START marker and deletes without a
// directory fsync, and Open must keep refusing such markers (a marker
// that tidwall acts on deletes segments).
//
// The phases, each restartable after a crash at any point:
//
//  1. archive: copy each segment to the archive directory (temporary
//     file, fsync, rename), then fsync that directory. A crash or an
//     error (ENOSPC) here leaves the log as it was; copies already made
//     are reused by the next run.
//  2. manifest: write the new wal/MANIFEST naming the first retained seq
//     and the removed range (tmp, fsync, rename, directory fsync). From
//     here on the removed segments are no part of the log.
//  3. remove: delete each removed segment file from the log directory.
//  4. sync: fsync the log directory.
//
// A crash after phase 2 leaves segment files before the first retained
// seq ("pending"): readers skip them, and the next Open or Compact
// removes them (finishCompaction), after checking that the archive holds
// an identical copy — making one if it does not.

// CompactPhase names a point of a compaction, for CompactOptions.Hook.
type CompactPhase string

const (
	PhaseArchive  CompactPhase = "archive"  // before copying a segment to the archive
	PhaseManifest CompactPhase = "manifest" // before writing the new manifest
	PhaseRemove   CompactPhase = "remove"   // before removing a segment file
	PhaseSync     CompactPhase = "sync"     // before the final directory fsync
	// PhaseVerify: an archived copy is durable and about to be read back
	// and checked (archive.go); a hook may damage it there.
	PhaseVerify CompactPhase = "verify"
)

// CompactOptions configure Log.Compact.
type CompactOptions struct {
	// Before: remove every segment whose entries all have a seq below
	// it. The segment holding Before, and the tail segment, stay.
	Before uint64
	// Archive is the directory removed segments are moved to (created if
	// needed); empty deletes them.
	Archive string
	// HomeID is the id of the home whose log this is (state/home-id):
	// recorded in the archive's ARCHIVE and in wal/MANIFEST, and an
	// archive recording another id is refused (archive.go). Empty: the
	// manifest's, if any.
	HomeID string
	// DryRun computes what would be removed and changes nothing.
	DryRun bool
	// Now stamps the manifest; default time.Now.
	Now func() time.Time
	// Hook, when set, is called before each phase with the segment it
	// concerns ("" for manifest and sync); an error aborts the compaction
	// there. It is the seam crash tests kill the process in.
	Hook func(phase CompactPhase, segment string) error
}

// CompactResult says what Compact removed (or, dry, would remove).
type CompactResult struct {
	FirstSeq    uint64        `json:"first_seq"`     // first retained seq before
	NewFirstSeq uint64        `json:"new_first_seq"` // first retained seq after
	Segments    []SegmentStat `json:"segments"`      // removed segments (Entries not counted)
	Bytes       int64         `json:"bytes"`
	Archive     string        `json:"archive,omitempty"`
	DryRun      bool          `json:"dry_run,omitempty"`
}

// ErrBadArchive is returned for an archive directory that is the log
// directory or lies inside it.
var ErrBadArchive = errors.New("wal: bad archive directory")

// Compact removes the segments of the log wholly before o.Before (see
// the phases above). It runs beside appends: it never touches the tail
// segment, and the committer writes only there. An error leaves the log
// whole: before the manifest nothing was removed; after it the pending
// files are removed by the next Open or Compact.
func (l *Log) Compact(ctx context.Context, o CompactOptions) (CompactResult, error) {
	l.compactMu.Lock()
	defer l.compactMu.Unlock()
	// Held read-locked so that Close (which releases LOCK) waits for us.
	l.sendMu.RLock()
	defer l.sendMu.RUnlock()
	if l.closed {
		return CompactResult{}, ErrClosed
	}
	if err := l.Err(); err != nil {
		return CompactResult{}, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	dir := l.opts.Dir
	if o.Archive != "" {
		abs, err := checkArchive(dir, o.Archive)
		if err != nil {
			return CompactResult{}, err
		}
		o.Archive = abs
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return CompactResult{}, err
	}
	homeID := o.HomeID
	if m != nil && m.HomeID != "" {
		if homeID != "" && homeID != m.HomeID {
			return CompactResult{}, fmt.Errorf("%w: wal/%s records home %s, this home is %s (state/home-id): is this log another home's?", ErrForeignArchive, manifestName, m.HomeID, homeID)
		}
		homeID = m.HomeID
	}
	res := CompactResult{FirstSeq: m.firstSeq(), NewFirstSeq: m.firstSeq(), Segments: []SegmentStat{}, Archive: o.Archive, DryRun: o.DryRun}
	if !o.DryRun {
		// A compaction interrupted earlier: finish it first.
		if err := finishCompaction(dir, m, l.opts.NoSync); err != nil {
			return res, fmt.Errorf("wal: compact: finish the previous compaction: %w", err)
		}
	}
	segs, err := listSegments(dir)
	if err != nil {
		return res, fmt.Errorf("wal: compact: %w", err)
	}
	_, segs = retainedSegments(segs, m.firstSeq())
	var drop []segmentFile
	for i := 0; i+1 < len(segs) && segs[i+1].First <= o.Before; i++ {
		drop = append(drop, segs[i])
	}
	if len(drop) == 0 {
		return res, nil
	}
	newFirst := segs[len(drop)].First
	for i, s := range drop {
		fi, err := os.Stat(filepath.Join(dir, s.Name))
		if err != nil {
			return res, fmt.Errorf("wal: compact: %w", err)
		}
		next := newFirst
		if i+1 < len(drop) {
			next = drop[i+1].First
		}
		res.Segments = append(res.Segments, SegmentStat{Name: s.Name, Size: fi.Size(), First: s.First, Last: next - 1, Entries: int(next - s.First)})
		res.Bytes += fi.Size()
	}
	res.NewFirstSeq = newFirst
	if o.DryRun {
		return res, nil
	}
	hook := func(p CompactPhase, seg string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if o.Hook != nil {
			return o.Hook(p, seg)
		}
		return nil
	}
	fail := func(err error) (CompactResult, error) {
		res.NewFirstSeq = res.FirstSeq
		return res, fmt.Errorf("wal: compact: %w (nothing was removed)", err)
	}
	if o.Archive != "" {
		if err := mkdirAll(o.Archive, l.opts.NoSync); err != nil {
			return fail(err)
		}
		// Checked again now that it exists (a symlink made meanwhile).
		if _, err := checkArchive(dir, o.Archive); err != nil {
			return fail(err)
		}
		ident, err := checkArchiveOwner(o.Archive, homeID, false)
		if err != nil {
			return fail(err)
		}
		if ident == nil {
			ident = &ArchiveIdentity{}
		}
		if homeID != "" {
			ident.HomeID = homeID
		}
		var copies []string
		for _, s := range drop {
			if err := hook(PhaseArchive, s.Name); err != nil {
				return fail(err)
			}
			if err := archiveSegment(l.compactFS(), dir, o.Archive, s.Name, l.opts.NoSync); err != nil {
				return fail(fmt.Errorf("archive %s: %w", s.Name, err))
			}
			copies = append(copies, s.Name)
		}
		if !l.opts.NoSync {
			if err := home.SyncDir(o.Archive); err != nil {
				return fail(err)
			}
		}
		// Every copy is durable: read each back and check it before the
		// manifest makes the removal final.
		for i, name := range copies {
			if err := hook(PhaseVerify, name); err != nil {
				return fail(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return fail(err)
			}
			rec, err := verifyArchivedCopy(filepath.Join(o.Archive, name), drop[i], b)
			if err != nil {
				os.Remove(filepath.Join(o.Archive, name)) // a bad copy is no copy; the next run makes a new one
				return fail(fmt.Errorf("archive %s: %w", name, err))
			}
			ident.Segments = append(ident.Segments, rec)
		}
		if err := writeArchiveIdentity(o.Archive, ident); err != nil {
			return fail(fmt.Errorf("write %s: %w", filepath.Join(o.Archive, archiveIdentityName), err))
		}
	}
	if err := hook(PhaseManifest, ""); err != nil {
		return fail(err)
	}
	r := RemovedRange{First: res.FirstSeq, Last: newFirst - 1, Segments: len(drop), Bytes: res.Bytes, Archive: o.Archive, At: o.Now().UnixMilli()}
	nm := m.withRemoved(r, newFirst)
	nm.HomeID = homeID
	if err := writeManifest(l.compactFS(), dir, nm, l.opts.NoSync); err != nil {
		return fail(fmt.Errorf("write %s: %w", manifestName, err))
	}
	l.mu.Lock()
	l.first = newFirst
	l.mu.Unlock()
	// The manifest is durable: the removal is decided. Errors from here
	// on leave pending files that the next Open or Compact removes.
	for _, s := range drop {
		if err := hook(PhaseRemove, s.Name); err != nil {
			return res, fmt.Errorf("wal: compact: %w (the next open finishes it)", err)
		}
		if err := os.Remove(filepath.Join(dir, s.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, fmt.Errorf("wal: compact: %w (the next open finishes it)", err)
		}
	}
	if err := hook(PhaseSync, ""); err != nil {
		return res, fmt.Errorf("wal: compact: %w (the next open finishes it)", err)
	}
	if !l.opts.NoSync {
		if err := home.SyncDir(dir); err != nil {
			return res, fmt.Errorf("wal: compact: fsync %s: %w", dir, err)
		}
	}
	return res, nil
}

// archiveSegment copies segment name of the log in dir to the archive
// directory through fsys: a temporary file, fsynced, renamed into place
// (writeDurable; the caller fsyncs the archive directory). An identical
// copy already there is kept.
func archiveSegment(fsys home.FS, dir, archive, name string, noSync bool) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	dst := filepath.Join(archive, name)
	if sfi, err := os.Stat(filepath.Join(dir, name)); err == nil {
		if dfi, err := os.Stat(dst); err == nil && os.SameFile(sfi, dfi) {
			// The "copy" is the segment itself (the archive is the log
			// directory under another name): removing it would lose it.
			return fmt.Errorf("%w: %s is the segment file itself (the archive directory is the log directory under another name)", ErrBadArchive, dst)
		}
	}
	if have, err := os.ReadFile(dst); err == nil {
		if bytes.Equal(have, b) {
			return nil // copied by an earlier, interrupted run
		}
		// Copies are renamed into place whole: a different file is
		// another log's (two homes sharing one archive directory).
		return fmt.Errorf("%w: %s already holds a different %s (another log's archive?)", ErrBadArchive, archive, name)
	}
	return writeDurable(fsys, dst, b, noSync, true)
}

// finishCompaction removes the pending segments an interrupted compaction
// left (wholly before the manifest's first retained seq, with a segment
// starting exactly there): a segment of an archived range only once the
// archive holds an identical copy, made now if missing. A segment it
// cannot archive (the archive directory is gone) stays pending, harmless.
func finishCompaction(dir string, m *Manifest, noSync bool) error {
	if m == nil {
		return nil
	}
	segs, err := listSegments(dir)
	if err != nil {
		return err
	}
	pending, _ := retainedSegments(segs, m.firstSeq())
	if len(pending) == 0 {
		return nil
	}
	removed := false
	for _, p := range pending {
		r := m.rangeOf(p.First)
		if r == nil {
			continue
		}
		if r.Archive != "" {
			if _, err := checkArchive(dir, r.Archive); err != nil {
				continue // never "archive" a segment onto itself
			}
			if err := mkdirAll(r.Archive, noSync); err != nil {
				continue
			}
			if err := archiveSegment(nil, dir, r.Archive, p.Name, noSync); err != nil {
				continue
			}
			if !noSync {
				if err := home.SyncDir(r.Archive); err != nil {
					continue
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, p.Name))
			if err != nil {
				continue
			}
			rec, err := verifyArchivedCopy(filepath.Join(r.Archive, p.Name), p, b)
			if err != nil {
				continue
			}
			if ident, err := checkArchiveOwner(r.Archive, m.HomeID, false); err == nil {
				if ident == nil {
					ident = &ArchiveIdentity{HomeID: m.HomeID}
				}
				if ident.segment(p.Name) == nil {
					ident.Segments = append(ident.Segments, rec)
					if writeArchiveIdentity(r.Archive, ident) != nil {
						continue
					}
				}
			} else {
				continue
			}
		}
		if err := os.Remove(filepath.Join(dir, p.Name)); err == nil {
			removed = true
		}
	}
	if removed && !noSync {
		return home.SyncDir(dir)
	}
	return nil
}

// SegmentInfo is a segment file of the retained log.
type SegmentInfo struct {
	Name  string `json:"name"`
	First uint64 `json:"first_seq"`
	Size  int64  `json:"size"`
}

// Segments lists the retained segment files of the log in dir, oldest
// first, with their sizes: from the manifest's first retained seq on
// (files an interrupted compaction left before it are not listed). It
// reads no segment.
func Segments(dir string) ([]SegmentInfo, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	segs, err := listSegments(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	_, segs = retainedSegments(segs, m.firstSeq())
	out := make([]SegmentInfo, 0, len(segs))
	if len(segs) == 0 {
		return out, nil
	}
	// One stat per segment, relative to the directory opened once: on a
	// log of 1,000 segments a stat by full path walks the path's
	// components each time (about twice the time of the whole listing).
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(d)
	for _, s := range segs {
		size, err := sizeAt(d, s.Name)
		if err != nil {
			return nil, fmt.Errorf("wal: %w", &fs.PathError{Op: "stat", Path: filepath.Join(dir, s.Name), Err: err})
		}
		out = append(out, SegmentInfo{Name: s.Name, First: s.First, Size: size})
	}
	return out, nil
}

// sizeAt is the size of the file name in the directory open as dirfd,
// following a symlink as os.Stat does.
func sizeAt(dirfd int, name string) (int64, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(dirfd, name, &st, 0)
		if err == unix.EINTR {
			continue
		}
		return st.Size, err
	}
}

// Removable returns how many of segs (as Segments lists them) a
// compaction up to before removes: those wholly before it, never the
// last. Log.Compact removes exactly these.
func Removable(segs []SegmentInfo, before uint64) int {
	n := 0
	for n+1 < len(segs) && segs[n+1].First <= before {
		n++
	}
	return n
}

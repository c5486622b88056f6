package wal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/events"
)

// cursor reads segment files sequentially from a position, without
// tidwall and without the lock. It is what Log.Events and Reader use.
type cursor struct {
	dir     string
	started bool
	seg     segmentFile
	off     int64  // byte offset in seg of the next frame
	next    uint64 // sequence expected at off
	buf     []byte // reused by readFrom: decoded events copy what they keep
	// readBytes counts the bytes read from segment files (for the tests).
	readBytes int64
	// f is the open segment file fname, between readFrom calls of one
	// read call.
	f     *os.File
	fname string
	// suspect is where a live read last found a bad frame with good ones
	// after it in the last segment (-1: none). Reading bytes the writer is
	// copying into preallocated space can show exactly that — zeros, then
	// the end of the write — so the first sighting only pauses the read;
	// the same damage found again by a later read is corruption.
	suspect int64
	// archive: dir is an archive directory (see readArchived), which has
	// no manifest; a sequence it does not hold is errArchiveMissing.
	archive bool
}

// errArchiveMissing: an archive directory lacks the segment holding a
// sequence (readArchived turns it into a *CompactedError).
var errArchiveMissing = errors.New("not in the archive")

// readPiece is how much of a segment the cursor reads at a time. A read
// that wants a few events (the tail after a snapshot, the first event of a
// segment) reads this much, not the whole segment: in a new process every
// page of a fresh buffer is a page fault, and reading a 4 MiB segment into
// one cost `cmlab status` more than everything else it does. A long read
// goes on piece by piece through the same buffer. A frame that does not
// fit in a piece, and any bad frame, is read again with the rest of the
// file from its offset (see cursor.read). A variable for the tests.
var readPiece = 256 << 10

// readFrom returns bytes of the segment file from off: the whole rest of
// the file (eof true) if limit ≤ 0 or the rest is no longer than limit,
// else exactly limit bytes (eof false). The bytes live in a buffer the
// next readFrom reuses (decoded events copy what they keep), sized from
// the file (plus one to see the end), not grown and copied as io.ReadAll
// would, and not reallocated (and zeroed) for every piece or segment of a
// long sequential read.
func (c *cursor) readFrom(limit int) ([]byte, bool, error) {
	if c.f != nil && c.fname != c.seg.Name {
		c.closeFile()
	}
	if c.f == nil {
		f, err := os.Open(filepath.Join(c.dir, c.seg.Name))
		if err != nil {
			return nil, false, err
		}
		c.f, c.fname = f, c.seg.Name
	}
	f := c.f
	want := 512
	if fi, err := f.Stat(); err == nil && fi.Size()-c.off >= 0 {
		want = int(fi.Size()-c.off) + 1
	}
	if limit > 0 && want-1 > limit {
		if cap(c.buf) < limit {
			c.buf = make([]byte, 0, limit)
		}
		buf := c.buf[:limit]
		n, err := f.ReadAt(buf, c.off)
		c.readBytes += int64(n)
		switch {
		case n == limit:
			return buf, false, nil
		case err != nil && err != io.EOF:
			return nil, false, err
		}
		return buf[:n], true, nil // the file shrank since Stat: that is its end
	}
	if _, err := f.Seek(c.off, io.SeekStart); err != nil {
		return nil, false, err
	}
	if cap(c.buf) < want {
		c.buf = make([]byte, 0, want)
	}
	buf := c.buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // the file grew since Stat
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		c.readBytes += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	c.buf = buf[:0]
	return buf, true, nil
}

// closeFile closes the segment file readFrom keeps open between the
// pieces of one read call (read closes it when it returns: a later call
// opens the file again, and sees a compaction that removed it).
func (c *cursor) closeFile() {
	if c.f != nil {
		c.f.Close()
		c.f, c.fname = nil, ""
	}
}

func (c *cursor) corrupt(off int64, reason string) error {
	return fmt.Errorf("%w: segment %s offset %d seq %d: %s", ErrCorrupt, c.seg.Name, off, c.next, reason)
}

// read yields the events with from ≤ seq ≤ to that are on disk past the
// cursor's position, advancing it. live tolerates a bad or incomplete
// frame with no good entry after it in the last segment (a write in
// progress, or a torn tail a later Open will repair): reading stops there
// and may resume later. Preallocated zeros ending the last segment end
// the entries in either mode. It returns stop=true when yield asked to stop or
// seq to was passed.
func (c *cursor) read(from, to uint64, live bool, yield func(*events.Event, error) bool) (stop bool, err error) {
	defer c.closeFile()
	segs, err := listSegments(c.dir)
	if err != nil {
		return true, err
	}
	if len(segs) == 0 && (c.started || c.archive) {
		return false, nil
	}
	if !c.started {
		base := uint64(1)
		if !c.archive {
			m, err := ReadManifest(c.dir)
			if err != nil {
				return true, err
			}
			base = m.firstSeq()
			if m == nil && len(segs) == 0 {
				return false, nil // a new log
			}
			if m != nil {
				if _, segs = retainedSegments(segs, base); len(segs) == 0 || segs[0].First != base {
					// The manifest names a segment that is not there.
					return true, fmt.Errorf("%w: segment %s offset 0 seq %d: missing segment: wal/%s says the log starts there", ErrCorrupt, segmentName(base), base, manifestName)
				}
			}
			if from < base {
				// Callers read what lies before base from the archive
				// (readArchived) first; this is a direct read.
				return true, compactedError(m, from, "", nil)
			}
		}
		if from < segs[0].First {
			if c.archive {
				return true, fmt.Errorf("%w: seq %d (the archive starts at %d)", errArchiveMissing, from, segs[0].First)
			}
			// cmlab cuts the front of its log only by compaction, which
			// records it in the manifest (see scanDir): the entries before
			// the first segment are missing, not absent.
			if m, merr := ReadManifest(c.dir); merr == nil && m == nil {
				return true, fmt.Errorf("%w: segment %s offset 0 seq %d: %s: the log starts at seq %d with no wal/MANIFEST (%w)", ErrCorrupt, segmentName(base), base, ReasonMissing, segs[0].First, ErrBadManifest)
			}
			return true, fmt.Errorf("%w: segment %s offset 0 seq %d: %s: the log starts at seq %d", ErrCorrupt, segmentName(base), base, ReasonMissing, segs[0].First)
		}
		i := 0
		for j, s := range segs {
			if s.First <= from {
				i = j
			}
		}
		c.seg, c.off, c.next, c.started, c.suspect = segs[i], 0, segs[i].First, true, -1
	}
	limit := readPiece
	for {
		data, eof, err := c.readFrom(limit)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && !c.archive {
				if m, merr := ReadManifest(c.dir); merr == nil && m.firstSeq() > c.seg.First {
					return true, fmt.Errorf("%w: segment %s was removed by a compaction while being read (the log now starts at seq %d); read again", ErrCompacted, c.seg.Name, m.firstSeq())
				}
			}
			return true, fmt.Errorf("wal: read %s: %w", c.seg.Name, err)
		}
		isLast := c.seg.Name == segs[len(segs)-1].Name
		base := c.off
		limit = readPiece
		more := !eof // data ends before the file does: read on from c.off
		for p := 0; p < len(data); {
			if c.next > to {
				// Past the last sequence asked for: what follows may be a
				// write in progress.
				return true, nil
			}
			entry, n, reason := frameAt(data, p)
			var seq uint64
			var ev *events.Event
			if reason == "" {
				// An entry to be yielded is checked by DecodeEntry itself
				// (version, CRC, seq), so its CRC is computed once; any
				// failure takes the checkEntry path for its reason.
				if s, ok := entrySeq(entry); ok && s == c.next && s >= from && s <= to {
					if e, err := DecodeEntry(entry, s); err == nil {
						ev, seq = e, s
					}
				}
				if ev == nil {
					seq, reason = checkEntry(entry, c.next)
				}
			}
			if reason != "" && !eof {
				// A frame cut by the end of the piece, or damage: read
				// again from its offset; a frame that starts a piece and
				// is still not whole there, with the rest of the file, as
				// the checks below expect.
				if p == 0 {
					limit = 0
				}
				break
			}
			if reason != "" {
				if isLast && preallocatedFrom(data, base, p) {
					return false, nil // the end of the entries, for now
				}
				if live && isLast && preallocatedSize(base+int64(len(data))) && unflushedGap(data, base, p) {
					// What a power cut leaves in preallocated space, or a
					// write in progress: a torn tail, the next Open cuts it.
					return false, nil
				}
				if live && isLast {
					if q, _ := resync(data, p+1, c.next); q == len(data) || c.suspect != c.off {
						if q < len(data) {
							c.suspect = c.off
						}
						return false, nil
					}
				}
				return true, c.corrupt(c.off, reason)
			}
			if seq > to {
				return true, nil
			}
			if seq >= from {
				if ev == nil {
					if ev, err = DecodeEntry(entry, seq); err != nil {
						return true, fmt.Errorf("segment %s offset %d: %w", c.seg.Name, c.off, err)
					}
				}
				if !yield(ev, nil) {
					return true, nil
				}
			}
			c.off += int64(n)
			c.next++
			p += n
		}
		if more {
			continue
		}
		// End of this segment's bytes: move on if a later segment exists.
		nextSeg := segmentAfter(segs, c.seg.First)
		if nextSeg == nil {
			if segs, err = listSegments(c.dir); err != nil {
				return true, err
			}
			if nextSeg = segmentAfter(segs, c.seg.First); nextSeg == nil {
				return false, nil
			}
		}
		// The next segment exists, so this one is complete; read what may
		// have been written to it since.
		if rest, _, err := c.readFrom(readPiece); err == nil && len(rest) > 0 {
			continue
		}
		if nextSeg.First != c.next {
			if c.archive && nextSeg.First > c.next {
				return true, fmt.Errorf("%w: seq %d (the next segment there starts at %d)", errArchiveMissing, c.next, nextSeg.First)
			}
			return true, fmt.Errorf("%w: segment %s starts at seq %d, expected %d", ErrCorrupt, nextSeg.Name, nextSeg.First, c.next)
		}
		c.seg, c.off = *nextSeg, 0
	}
}

// segmentAfter is the first of segs that starts after first, nil if none.
func segmentAfter(segs []segmentFile, first uint64) *segmentFile {
	for i := range segs {
		if segs[i].First > first {
			return &segs[i]
		}
	}
	return nil
}

// readEvents yields the events from..to of the log in dir, then stops;
// those before the first retained seq from the archive (archive, when
// set, instead of the directories the manifest names).
func readEvents(dir, archive string, from, to uint64, yield func(*events.Event, error) bool) {
	if from == 0 {
		from = 1
	}
	if to < from {
		return
	}
	from, ok := readArchivedPrefix(dir, archive, from, to, yield)
	if !ok || from > to {
		return
	}
	c := &cursor{dir: dir}
	if _, err := c.read(from, to, false, yield); err != nil {
		yield(nil, err)
	}
}

// readArchivedPrefix yields the events from..min(to, first retained seq - 1)
// of the log in dir from its archive (see readArchived) and returns the
// sequence to read on from in dir; ok is false when the reading is over
// (yield stopped it, or an error was yielded).
func readArchivedPrefix(dir, archive string, from, to uint64, yield func(*events.Event, error) bool) (next uint64, ok bool) {
	m, err := ReadManifest(dir)
	if err != nil {
		yield(nil, err)
		return 0, false
	}
	base := m.firstSeq()
	if from >= base {
		return from, true
	}
	stop, err := readArchived(m, archive, from, min(to, base-1), yield)
	if err != nil {
		yield(nil, err)
		return 0, false
	}
	if stop {
		return 0, false
	}
	return base, true
}

// readArchived yields the events from..to (all before the first retained
// seq of m) from the archive directories of m's removed ranges, or from
// archive when set (an operator who moved the archive). A deleted range,
// or an archive lacking a segment, is a *CompactedError; damage inside an
// archived segment wraps ErrCorrupt like damage in the log. stop is true
// when yield asked to stop.
func readArchived(m *Manifest, archive string, from, to uint64, yield func(*events.Event, error) bool) (stop bool, err error) {
	for from <= to {
		r := m.rangeOf(from)
		if r == nil {
			return true, compactedError(m, from, "", nil)
		}
		dir := cmp.Or(archive, r.Archive)
		if dir == "" {
			return true, compactedError(m, from, "", nil)
		}
		if _, err := checkArchiveOwner(dir, m.HomeID, archive != ""); err != nil {
			return true, err
		}
		hi := min(to, r.Last)
		got, stopped := from-1, false
		c := &cursor{dir: dir, archive: true}
		_, rerr := c.read(from, hi, false, func(ev *events.Event, err error) bool {
			got = ev.Seq
			if !yield(ev, nil) {
				stopped = true
				return false
			}
			return true
		})
		switch {
		case stopped:
			return true, nil
		case rerr != nil && (errors.Is(rerr, errArchiveMissing) || errors.Is(rerr, os.ErrNotExist)):
			return true, compactedError(m, got+1, dir, rerr)
		case rerr != nil:
			return true, fmt.Errorf("archive %s: %w", dir, rerr)
		case got < hi:
			return true, compactedError(m, got+1, dir, fmt.Errorf("%w: seq %d", errArchiveMissing, got+1))
		}
		from = hi + 1
	}
	return false, nil
}

// compactedError is the *CompactedError for seq of the log whose
// manifest is m, looked for in dir ("" when not looked for).
func compactedError(m *Manifest, seq uint64, dir string, cause error) error {
	e := &CompactedError{Seq: seq, FirstSeq: m.firstSeq(), Archive: dir, Cause: cause}
	if r := m.rangeOf(seq); r != nil {
		e.Range = *r
	} else {
		e.Range = RemovedRange{First: seq, Last: m.firstSeq() - 1}
	}
	if dir != "" {
		e.Missing = fmt.Sprintf("the segment holding seq %d", seq)
	}
	return e
}

// Reader reads a log without taking its lock, so it works on a log that
// another process holds and is appending to. It sees what is on disk:
// entries written but not yet fsynced by that process included, and a
// write in progress at the tail is simply not there yet.
type Reader struct {
	dir     string
	archive string
}

// SetArchive makes r read the sequences before the log's first retained
// one from the segment files in dir, instead of the archive directories
// wal/MANIFEST names (for an archive that was moved).
func (r *Reader) SetArchive(dir string) { r.archive = dir }

// OpenReader returns a Reader of the log in dir.
func OpenReader(dir string) (*Reader, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("wal: %s is not a directory", dir)
	}
	return &Reader{dir: dir}, nil
}

// Events yields every complete good event from seq from to the end of what
// is on disk now. Damage other than at the tail of the last segment is
// yielded as an error wrapping ErrCorrupt and ends the iteration.
func (r *Reader) Events(from uint64) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		from, ok := r.readArchived(from, yield)
		if !ok {
			return
		}
		c := &cursor{dir: r.dir, suspect: -1}
		var pausedSeg string
		pausedOff := int64(-1)
		for {
			stop, err := c.read(from, math.MaxUint64, true, yield)
			if err != nil {
				yield(nil, err)
				return
			}
			if stop || c.suspect != c.off || (c.seg.Name == pausedSeg && c.off == pausedOff) {
				return
			}
			// Paused at the first sighting of a bad frame with good ones
			// after it in the last segment: a write in progress looks like
			// that for an instant, damage looks like that again. Read once
			// more (Follow does so at its next poll), or a one-shot read
			// would end there silently, hiding the damage and every entry
			// after it. Each pass either moves on or stops here.
			pausedSeg, pausedOff = c.seg.Name, c.off
		}
	}
}

// readArchived yields the events from seq from (0: 1) that the archive
// holds, as Events and Follow begin; it returns the seq to read on from
// in the log directory, false when the iteration ended.
func (r *Reader) readArchived(from uint64, yield func(*events.Event, error) bool) (uint64, bool) {
	return readArchivedPrefix(r.dir, r.archive, max(from, 1), math.MaxUint64, yield)
}

// Follow is Events that does not end: at the end of the log it polls every
// poll (default 100ms) for new entries until ctx ends.
func (r *Reader) Follow(ctx context.Context, from uint64, poll time.Duration) iter.Seq2[*events.Event, error] {
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	return func(yield func(*events.Event, error) bool) {
		from, ok := r.readArchived(from, yield)
		if !ok {
			return
		}
		c := &cursor{dir: r.dir}
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			stop, err := c.read(from, math.MaxUint64, true, yield)
			if err != nil {
				yield(nil, err)
				return
			}
			if stop {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// LastSeq returns the sequence of the last complete good entry on disk, 0
// for an empty log.
func (r *Reader) LastSeq() (uint64, error) {
	segs, err := listSegments(r.dir)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	if len(segs) == 0 {
		return 0, nil
	}
	last := segs[len(segs)-1]
	data, err := os.ReadFile(filepath.Join(r.dir, last.Name))
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	sc := scanSegment(last, data, true, false)
	if len(sc.Bad) > 0 && !sc.Bad[len(sc.Bad)-1].TornTail {
		return 0, &CorruptError{Dir: r.dir, Bad: sc.Bad}
	}
	// With a torn tail Next stops at the last good entry.
	return sc.Next - 1, nil
}

// FirstSeq returns the sequence of the first entry (1 for an empty log):
// the first retained seq of a compacted log (see Manifest).
func (r *Reader) FirstSeq() (uint64, error) {
	m, err := ReadManifest(r.dir)
	if err != nil {
		return 0, err
	}
	if m != nil {
		return m.firstSeq(), nil
	}
	segs, err := listSegments(r.dir)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	if len(segs) == 0 {
		return 1, nil
	}
	return segs[0].First, nil
}

// Report is the result of Verify: every damaged stretch of every segment.
type Report struct {
	Dir      string     `json:"dir"`
	Segments int        `json:"segments"`
	Entries  uint64     `json:"entries"` // good entries
	First    uint64     `json:"first_seq"`
	Last     uint64     `json:"last_seq"`
	Bad      []BadEntry `json:"bad"` // damage to acknowledged entries, in log order
	// TornTail is damage at the end of the last segment that the next Open
	// repairs (or a write in progress, when a daemon holds the log).
	TornTail *BadEntry `json:"torn_tail,omitempty"`
	// Manifest is wal/MANIFEST of a compacted log: First is its first
	// retained seq, and the sequences before it are its removed ranges
	// (archived or deleted), not checked here.
	Manifest *Manifest `json:"manifest,omitempty"`
	// Pending are segment files before the first retained seq that an
	// interrupted compaction left; the next Open removes them.
	Pending []string `json:"pending,omitempty"`
}

// OK reports whether no acknowledged entry is damaged.
func (r Report) OK() bool { return len(r.Bad) == 0 }

// Verify checks every entry of every segment of the log in dir: frame,
// version, CRC32C, stored seq and envelope, and the sequence continuity
// between segments. It needs no lock. The Report lists every damaged
// stretch; when any is not a torn tail, the error is a *CorruptError
// (wrapping ErrCorrupt) over the same list.
func Verify(dir string) (Report, error) { return VerifyWith(dir, VerifyOptions{}) }

// VerifyWith is Verify; o.Acked turns damage at the log's end that holds
// acknowledged entries into corruption (acked.go).
func VerifyWith(dir string, o VerifyOptions) (Report, error) {
	rep := Report{Dir: dir, Bad: []BadEntry{}} // [] in JSON, not null
	if err := refuseMarkers(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		// The entries may all be good, but Open would refuse the log.
		return rep, fmt.Errorf("wal: verify %s: %w", dir, err)
	}
	var extra []BadEntry
	ds, err := scanDir(dir, true, func(sc *segmentScan, _ []byte) error {
		for _, g := range sc.Good {
			if _, err := DecodeEntry(g.Entry, g.Seq); err != nil {
				extra = append(extra, BadEntry{Segment: sc.Segment.Name, Offset: g.Off, Length: g.Len, Seq: g.Seq, Reason: ReasonUndecodable})
			}
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("wal: verify %s: %w", dir, err)
	}
	ds.refuseAckedCut(o.Acked, o.AcceptTailLoss)
	rep.Segments, rep.First, rep.Last, rep.Manifest = len(ds.Segments), ds.First, ds.Last, ds.Manifest
	for _, p := range ds.Pending {
		rep.Pending = append(rep.Pending, p.Name)
	}
	for _, sc := range ds.Segments {
		rep.Entries += uint64(sc.Count)
	}
	for _, b := range ds.Bad {
		if b.TornTail {
			b := b
			rep.TornTail = &b
		} else {
			rep.Bad = append(rep.Bad, b)
		}
	}
	rep.Bad = append(rep.Bad, extra...)
	if len(rep.Bad) > 0 {
		return rep, &CorruptError{Dir: dir, Bad: rep.Bad}
	}
	return rep, nil
}

// SegmentStat describes one segment file.
type SegmentStat struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	First   uint64 `json:"first_seq"`
	Last    uint64 `json:"last_seq"` // First-1 when empty
	Entries int    `json:"entries"`
	// Preallocated is the zeros the writer keeps ahead of the entries of
	// the last segment (included in Size; not damage).
	Preallocated int64 `json:"preallocated,omitempty"`
}

// StatReport summarises a log directory.
type StatReport struct {
	Dir      string            `json:"dir"`
	Segments []SegmentStat     `json:"segments"`
	Bytes    int64             `json:"bytes"`
	First    uint64            `json:"first_seq"`
	Last     uint64            `json:"last_seq"`
	Events   uint64            `json:"events"`
	ByType   map[string]uint64 `json:"by_type"`
	Damaged  int               `json:"damaged"` // damaged stretches of acknowledged entries (see Verify)
	// TornTail: the last segment ends in bad bytes (a write in progress,
	// or a torn tail the next Open repairs).
	TornTail bool `json:"torn_tail,omitempty"`
	LockPID  int  `json:"lock_pid,omitempty"`
	// Manifest is wal/MANIFEST of a compacted log (First is its first
	// retained seq; Segments and Bytes count retained segments only).
	Manifest *Manifest `json:"manifest,omitempty"`
	// Pending are segment files an interrupted compaction left (see Report).
	Pending []string `json:"pending,omitempty"`
}

// Stat reads the log in dir without its lock and summarises it: segments,
// sizes, first and last seq, event counts by type.
func Stat(dir string) (StatReport, error) {
	st := StatReport{Dir: dir, Segments: []SegmentStat{}, ByType: map[string]uint64{}, LockPID: LockHolder(dir)} // [] in JSON, not null
	ds, err := scanDir(dir, true, func(sc *segmentScan, _ []byte) error {
		for _, g := range sc.Good {
			ev, err := DecodeEntry(g.Entry, g.Seq)
			if err != nil {
				continue
			}
			st.ByType[ev.Type]++
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return st, fmt.Errorf("wal: stat: %w", err)
		}
		return st, fmt.Errorf("wal: stat %s: %w", dir, err)
	}
	st.First, st.Last, st.Manifest = ds.First, ds.Last, ds.Manifest
	for _, p := range ds.Pending {
		st.Pending = append(st.Pending, p.Name)
	}
	for _, b := range ds.Bad {
		if b.TornTail {
			st.TornTail = true
		} else {
			st.Damaged++
		}
	}
	for _, sc := range ds.Segments {
		st.Segments = append(st.Segments, SegmentStat{Name: sc.Segment.Name, Size: sc.Size, First: sc.Segment.First, Last: sc.Next - 1, Entries: sc.Count, Preallocated: sc.Prealloc})
		st.Bytes += sc.Size
		st.Events += uint64(sc.Count)
	}
	return st, nil
}

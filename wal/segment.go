package wal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/cmlab/cmlab/home"
)

// Segment files are written by github.com/tidwall/wal in its binary format
// and read back by this file's scanner, without tidwall, so that readers
// need neither the lock nor tidwall's whole-segment cache:
//
//	segment file 00000000000000000042   (20-digit index of its first entry)
//	+-------------------+----------------+-------------------+----------------+--
//	| uvarint len(e42)  | entry 42       | uvarint len(e43)  | entry 43       | …
//	+-------------------+----------------+-------------------+----------------+--
//
// A segment holds consecutive sequences; the next segment's name is the
// sequence after this segment's last entry. tidwall/wal also knows
// ".START"/".END" files from its truncation; cmlab never truncates through
// tidwall (compaction removes whole segments, see compact.go), so the
// scanner ignores such names (and every other non-20-digit name, MANIFEST
// included), and Open refuses a log holding a marker (see refuseNames).

// segmentNameLen is the length of a segment file name.
const segmentNameLen = 20

// Reasons a frame is bad. They are the vocabulary of BadEntry.Reason and of
// the wal.repaired event.
const (
	ReasonIncomplete  = "incomplete frame"
	ReasonBadLength   = "bad length"
	ReasonZeroFill    = "zero fill"
	ReasonEmpty       = "empty entry"
	ReasonBadVersion  = "bad version"
	ReasonBadCRC      = "bad crc"
	ReasonUndecodable = "undecodable envelope"
	ReasonSeq         = "seq mismatch"
	ReasonMissing     = "missing entries"
	// ReasonNoManifest: the log starts past seq 1 and has no wal/MANIFEST
	// (ErrBadManifest: repaired from the archive, not salvaged).
	ReasonNoManifest = "missing entries: the log starts past seq 1 with no wal/MANIFEST"
	ReasonZeroGap    = "zero gap"
)

// segmentName is the file name of the segment whose first entry is seq.
func segmentName(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// segmentFile is one segment found in a log directory.
type segmentFile struct {
	Name  string
	First uint64 // sequence of its first entry, from its name
}

// listSegments returns the segment files of dir in sequence order.
func listSegments(dir string) ([]segmentFile, error) {
	var out []segmentFile
	err := eachSegmentName(dir, func(name string, first uint64, rest string) {
		if rest == "" {
			out = append(out, segmentFile{Name: name, First: first})
		}
	})
	slices.SortFunc(out, func(a, b segmentFile) int { return cmp.Compare(a.First, b.First) })
	return out, err
}

// eachSegmentName calls fn for each file in dir whose name starts with a
// segment's name (the 20-digit seq of its first entry, not 0), with that
// seq and the rest of the name, in the directory's order (os.ReadDir's
// sort by name is left out: every caller orders what it keeps).
func eachSegmentName(dir string, fn func(name string, first uint64, rest string)) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || len(name) < segmentNameLen {
			continue
		}
		if first, err := strconv.ParseUint(name[:segmentNameLen], 10, 64); err == nil && first != 0 {
			fn(name, first, name[segmentNameLen:])
		}
	}
	return nil
}

// refuseMarkers is the error for a log directory holding a truncation
// marker (nil if none): Open refuses such a log, and Verify says so. A
// marker is what tidwall/wal's Open takes for one of an interrupted
// truncation (its rule: the 20-digit index of a segment, then ".START" or
// ".END"); it acts on one by deleting segments — every one before a START,
// every one after an END — and cmlab never truncates through tidwall, so a
// marker there is not cmlab's.
func refuseMarkers(dir string) error { return refuseNames(dir, false) }

// refuseNames is refuseMarkers and, with links, also the error for a file
// named as a segment (or a truncation marker) that is not a regular file:
// a symlink to a file elsewhere would have the log append to, repair or
// cut the link's target, outside the home. Open refuses such a log (one
// pass over the directory for both) and touches neither the link nor its
// target; readers (Verify, dump) read through it.
func refuseNames(dir string, links bool) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var markers []string
	for _, de := range des {
		name := de.Name()
		if len(name) < segmentNameLen {
			continue
		}
		first, err := strconv.ParseUint(name[:segmentNameLen], 10, 64)
		if err != nil {
			continue
		}
		if links && !de.Type().IsRegular() {
			return linkedSegment(dir, name, de.Type())
		}
		if rest := name[segmentNameLen:]; first != 0 && !de.IsDir() && (rest == ".START" || rest == ".END") {
			markers = append(markers, name)
		}
	}
	if len(markers) > 0 {
		slices.Sort(markers)
		return fmt.Errorf("%s is a tidwall/wal truncation marker, for which tidwall would delete segments; cmlab never truncates its log: move it out of the directory", markers[0])
	}
	return nil
}

// linkedSegment is the error for name in dir, a segment's name that is a
// typ, not a regular file.
func linkedSegment(dir, name string, typ os.FileMode) error {
	what := "a " + typ.String()
	fix := "put the file itself in its place"
	if typ&os.ModeSymlink != 0 {
		to, _ := os.Readlink(filepath.Join(dir, name))
		what = fmt.Sprintf("a symbolic link (to %s)", to)
		fix = fmt.Sprintf("put the file itself in its place, from the log's directory: rm %s && cp %s %s", name, home.ShellQuote(to), name)
	}
	return fmt.Errorf("%s is %s where a segment belongs: cmlab writes its log only inside its directory, never through a link\n  fix: %s, then run the command again", name, what, fix)
}

// frameAt parses the frame at data[off:]: it returns the entry bytes, the
// frame's total length, and a reason when the frame is not complete.
func frameAt(data []byte, off int) (entry []byte, n int, reason string) {
	size, k := binary.Uvarint(data[off:])
	switch {
	case k == 0:
		return nil, len(data) - off, ReasonIncomplete
	case k < 0:
		return nil, 0, ReasonBadLength
	case size > uint64(len(data)-off-k):
		return nil, len(data) - off, ReasonIncomplete
	}
	return data[off+k : off+k+int(size)], k + int(size), ""
}

// envelope bytes start with a msgpack fixmap header, the key "seq" and the
// seq as a fixed-width uint64 (0xcf + 8 bytes, big-endian): the encoder
// writes uint64 fields at full width. entrySeq reads it without decoding
// the envelope; the committer patches it the same way.
var seqKey = []byte{0xa3, 's', 'e', 'q', 0xcf}

const (
	seqOff = entryHeader + 1 + 5 // offset of the 8 seq bytes in an entry
	seqEnd = seqOff + 8
)

// entrySeq returns the seq stored in entry b, ok false if b does not have
// the expected envelope prefix.
func entrySeq(b []byte) (uint64, bool) {
	if len(b) < seqEnd || b[entryHeader]&0xf0 != 0x80 || !bytes.Equal(b[entryHeader+1:seqOff], seqKey) {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[seqOff:seqEnd]), true
}

// checkEntry validates entry b at index want without decoding the payload:
// version byte, CRC32C, and the stored seq. It returns the stored seq (0 if
// unknown) and the reason the entry is bad, "" if it is good.
func checkEntry(b []byte, want uint64) (uint64, string) {
	switch {
	case len(b) == 0:
		return 0, ReasonEmpty
	case len(b) < entryHeader:
		return 0, ReasonUndecodable
	case b[0] != entryVersion:
		return 0, ReasonBadVersion
	}
	if crc32.Checksum(b[entryHeader:], castagnoli) != binary.BigEndian.Uint32(b[1:5]) {
		return 0, ReasonBadCRC
	}
	seq, ok := entrySeq(b)
	if !ok {
		ev, err := DecodeEntry(b, 0)
		if err != nil {
			return 0, ReasonUndecodable
		}
		seq = ev.Seq
	}
	if seq != want {
		return seq, ReasonSeq
	}
	return seq, ""
}

// BadEntry locates one damaged stretch of a segment.
type BadEntry struct {
	Segment string `json:"segment"` // segment file name
	Offset  int64  `json:"offset"`  // byte offset of the damage in that file
	Length  int64  `json:"length"`  // bytes up to the next good entry (or end of file)
	Seq     uint64 `json:"seq"`     // sequence the first damaged entry should have
	// Lost is how many sequences the damage swallowed, known from the next
	// good entry or the next segment's name; 0 when unknown (torn tail).
	Lost   uint64 `json:"lost"`
	Reason string `json:"reason"`
	// TornTail: the damage runs to the end of the last segment with no good
	// entry after it. Open repairs it; it is not corruption of acknowledged data.
	TornTail bool `json:"torn_tail,omitempty"`
}

func (b BadEntry) String() string {
	s := fmt.Sprintf("segment %s offset %d seq %d: %s (%d bytes", b.Segment, b.Offset, b.Seq, b.Reason, b.Length)
	if b.Lost > 0 {
		s += fmt.Sprintf(", %d entries lost", b.Lost)
	}
	if b.TornTail {
		s += ", torn tail"
	}
	return s + ")"
}

// goodEntry is a valid entry found by a scan.
type goodEntry struct {
	Off   int64
	Len   int64 // frame length
	Seq   uint64
	Entry []byte // entry bytes (aliasing the segment data)
}

// segmentScan is the result of scanning one segment's bytes.
type segmentScan struct {
	Segment segmentFile
	Size    int64
	Good    []goodEntry // only filled when keep is set
	Count   int         // good entries
	Next    uint64      // sequence after the last good entry (First when none)
	End     int64       // offset just past the last good entry (0 when none)
	Bad     []BadEntry
	// Prealloc is the preallocated space (zeros) ending the last segment:
	// not damage; Open truncates it.
	Prealloc int64
	// Trusted: not read, taken from wal/VERIFIED (scanDirOpts); Stat is
	// its record there, or, for a segment read, its record to be.
	Trusted bool
	Stat    verifiedSeg
}

// scanSegment checks every frame of data, the bytes of seg. After a bad
// frame it resynchronises on the next offset that holds a complete frame
// with a good CRC. last tells whether this is the log's last segment
// (damage running to its end is a torn tail, zeros ending it may be
// preallocated space). keep retains good entries.
func scanSegment(seg segmentFile, data []byte, last, keep bool) segmentScan {
	sc := segmentScan{Segment: seg, Size: int64(len(data)), Next: seg.First}
	// zeros: the zero bytes ending a last segment whose size is a multiple
	// of preallocUnit. They may be preallocated space; a frame starting
	// among them surely is (see prealloc.go).
	preallocated := last && preallocatedSize(int64(len(data)))
	zeros := 0
	if preallocated {
		zeros = trailingZeros(data)
	}
	off := 0
	for off < len(data) {
		entry, n, reason := frameAt(data, off)
		var seq uint64
		if reason == "" {
			seq, reason = checkEntry(entry, sc.Next)
			if reason == ReasonSeq && seq > sc.Next {
				// A good entry after a gap: the sequences in between are missing.
				sc.Bad = append(sc.Bad, BadEntry{Segment: seg.Name, Offset: int64(off), Seq: sc.Next, Lost: seq - sc.Next, Reason: ReasonMissing})
				sc.Next = seq
				reason = ""
			}
		}
		if reason == "" {
			if keep {
				sc.Good = append(sc.Good, goodEntry{Off: int64(off), Len: int64(n), Seq: seq, Entry: entry})
			}
			sc.Count++
			sc.Next = seq + 1
			off += n
			sc.End = int64(off)
			continue
		}
		if zeros > 0 && off >= len(data)-zeros {
			sc.Prealloc = int64(len(data) - off)
			break
		}
		// Bad frame: find the next good one.
		next, nseq := resync(data, off+1, sc.Next)
		if next < len(data) && preallocated && unflushedGap(data, 0, off) {
			// Zeros up to a sector boundary, then more bytes, in
			// preallocated space: pages of unacknowledged groups that a
			// power cut left unwritten while later pages reached the disk
			// (overwrites inside the file's size are not ordered). Nothing
			// from here on was acknowledged: an acknowledgement waits for
			// an fdatasync that flushed every page written before it, so
			// a zero page below an entry means no sync covering that
			// entry completed. A torn tail, cut whole: as if no good
			// frame followed.
			next, reason = len(data), ReasonZeroGap
		}
		b := BadEntry{Segment: seg.Name, Offset: int64(off), Length: int64(next - off), Seq: sc.Next, Reason: reason}
		if next < len(data) {
			b.Lost = nseq - sc.Next
		} else if last {
			b.TornTail = true
			if zeros > 0 {
				// A torn write inside preallocated space: the damage ends
				// where the zeros begin (off is before them, see above).
				b.Length = int64(len(data) - zeros - off)
				sc.Prealloc = int64(zeros)
				sc.Bad = append(sc.Bad, b)
				break
			}
		}
		if allZero(data[off:next]) {
			b.Reason = ReasonZeroFill
		}
		sc.Bad = append(sc.Bad, b)
		if next < len(data) {
			sc.Next = nseq
		}
		off = next
	}
	return sc
}

// resync returns the first offset ≥ from holding a complete frame whose
// entry has a good CRC and a stored seq ≥ min, with that seq; len(data) if none.
func resync(data []byte, from int, min uint64) (int, uint64) {
	for p := from; p < len(data); p++ {
		size, k := binary.Uvarint(data[p:])
		if k <= 0 || size < seqEnd || size > uint64(len(data)-p-k) || data[p+k] != entryVersion {
			continue
		}
		e := data[p+k : p+k+int(size)]
		if crc32.Checksum(e[entryHeader:], castagnoli) != binary.BigEndian.Uint32(e[1:5]) {
			continue
		}
		if seq, ok := entrySeq(e); ok && seq >= min {
			return p, seq
		}
	}
	return len(data), 0
}

// unflushedGap reports whether data, the bytes of a file from offset
// base, holds at least minGap zeros from off up to a sector boundary of
// the file, followed by a non-zero byte: the shape unwritten pages leave.
// (A single damaged byte can zero a frame's length prefix, but not eight
// bytes: it stays damage.)
func unflushedGap(data []byte, base int64, off int) bool {
	g := off
	for g < len(data) && data[g] == 0 {
		g++
	}
	return g-off >= minGap && g < len(data) && (base+int64(g))%sectorSize == 0
}

const (
	// sectorSize is the smallest unit a disk writes whole.
	sectorSize = 512
	// minGap is the shortest run of zeros unflushedGap accepts. A power
	// cut that left fewer unwritten bytes before a sector boundary is
	// refused as damage: safe, and rare (under 2% of cuts).
	minGap = 8
)

// hasDamage reports whether bad holds damage other than a torn tail.
func hasDamage(bad []BadEntry) bool {
	for _, b := range bad {
		if !b.TornTail {
			return true
		}
	}
	return false
}

// allZero reports whether b holds only zero bytes. Readers of a live log
// run it over megabytes of preallocated space at every poll, so it compares
// whole chunks (memequal) rather than bytes.
func allZero(b []byte) bool {
	zeros := zeroPiece()
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// dirScan is the result of scanning every segment of a log directory.
type dirScan struct {
	Segments []segmentScan
	Bad      []BadEntry
	First    uint64 // first sequence (1 for an empty log; the manifest's first retained seq)
	Last     uint64 // last good sequence of the last segment, 0 when empty
	// Manifest is wal/MANIFEST, nil for a log never compacted.
	Manifest *Manifest
	// Pending are segments wholly before the manifest's first retained
	// seq that an interrupted compaction left in place: not part of the
	// log, not scanned, removed by the next Open (finishCompaction).
	Pending []segmentFile
}

// errStopScan stops scanDir early without an error.
var errStopScan = errors.New("stop")

// retainedSegments splits segs, the segment files of a log whose manifest
// says it starts at base, into those wholly before base that a compaction
// was removing (pending) and the retained ones. Segments count as pending
// only when a segment named exactly base exists: a manifest pointing
// past the log or at a missing segment leaves every file in place (and
// scanDir reports the missing one).
func retainedSegments(segs []segmentFile, base uint64) (pending, kept []segmentFile) {
	for i, s := range segs {
		if s.First == base {
			return segs[:i], segs[i:]
		}
	}
	return nil, segs
}

// scanDir scans the segments of dir in order, reading one segment at a
// time. each, when set, is called for every scanned segment with its
// bytes. Gaps and overlaps between segments are reported as bad entries,
// and so is a log that does not start where it should: at seq 1, or at
// the first retained seq of wal/MANIFEST.
func scanDir(dir string, keep bool, each func(sc *segmentScan, data []byte) error) (dirScan, error) {
	return scanDirOpts(dir, keep, nil, each)
}

// scanDirOpts is scanDir. With trust non-nil (wal/VERIFIED, see
// verify.go), a segment before the last that the record lists with its
// current size and mtime is not read: it is taken to hold the entries the
// record says (segmentScan.Trusted; each is not called for it), so a
// missing or cut segment still shows as a gap. Every other segment is read
// and checked, and its size and mtime are noted (segmentScan.Stat) for the
// next record.
func scanDirOpts(dir string, keep bool, trust map[string]verifiedSeg, each func(sc *segmentScan, data []byte) error) (dirScan, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return dirScan{}, err
	}
	ds := dirScan{First: 1}
	m, merr := ReadManifest(dir)
	switch {
	case merr != nil && errors.Is(merr, ErrCorrupt):
		// The first retained seq is unknown: report the manifest and
		// take the log as it stands.
		ds.Bad = append(ds.Bad, BadEntry{Segment: manifestName, Seq: 0, Reason: "bad manifest: " + merr.Error()})
		if len(segs) > 0 {
			ds.First = segs[0].First
		}
	case merr != nil:
		return dirScan{}, merr
	default:
		ds.Manifest = m
		ds.First = m.firstSeq()
		ds.Pending, segs = retainedSegments(segs, ds.First)
		if len(segs) > 0 && segs[0].First < ds.First {
			// The manifest names a first retained seq with no segment
			// starting there: past the log, or inside a segment.
			ds.Bad = append(ds.Bad, BadEntry{Segment: segmentName(ds.First), Offset: 0, Seq: ds.First,
				Reason: fmt.Sprintf("missing segment: wal/%s says the log starts at seq %d, but no segment starts there (the first starts at %d)", manifestName, ds.First, segs[0].First)})
			ds.First = segs[0].First
		}
	}
	next := ds.First
	if len(segs) > 0 && segs[0].First > ds.First {
		// cmlab cuts the front of its log only by compaction, which
		// records the first retained seq in the manifest: the entries
		// before the first segment were acknowledged and are gone, like
		// those of a missing middle segment. Salvage recreates the first
		// segment.
		reason := ReasonMissing
		if m == nil && merr == nil {
			// Or compacted, and wal/MANIFEST lost: the archive may hold them.
			reason = ReasonNoManifest
		}
		ds.Bad = append(ds.Bad, BadEntry{Segment: segmentName(ds.First), Offset: 0, Seq: ds.First, Lost: segs[0].First - ds.First, Reason: reason})
		next = segs[0].First
	} else if len(segs) == 0 && ds.First > 1 {
		// Compaction never removes the tail segment.
		ds.Bad = append(ds.Bad, BadEntry{Segment: segmentName(ds.First), Offset: 0, Seq: ds.First, Reason: fmt.Sprintf("missing segment: wal/%s says the log starts at seq %d, but the directory holds no segment", manifestName, ds.First)})
	}
	for i, seg := range segs {
		var st verifiedSeg
		if trust != nil && i < len(segs)-1 {
			fi, err := os.Stat(filepath.Join(dir, seg.Name))
			if err != nil {
				return ds, err
			}
			st = verifiedSeg{Name: seg.Name, First: seg.First, Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano()}
			if t, ok := trust[seg.Name]; ok && t.First == seg.First && t.Size == st.Size && t.MtimeNs == st.MtimeNs && t.Last >= seg.First {
				switch {
				case i == 0:
				case seg.First > next:
					b := BadEntry{Segment: ds.Segments[i-1].Segment.Name, Offset: ds.Segments[i-1].Size, Seq: next, Lost: seg.First - next, Reason: ReasonMissing}
					ds.Segments[i-1].Bad = append(ds.Segments[i-1].Bad, b)
					ds.Bad = append(ds.Bad, b)
				case seg.First < next:
					ds.Bad = append(ds.Bad, BadEntry{Segment: seg.Name, Offset: 0, Seq: seg.First, Reason: fmt.Sprintf("segment starts at seq %d but the previous one ends at %d", seg.First, next-1)})
				}
				ds.Segments = append(ds.Segments, segmentScan{Segment: seg, Size: t.Size, Next: t.Last + 1, Trusted: true, Stat: t})
				next = t.Last + 1
				continue
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, seg.Name))
		if err != nil {
			return ds, err
		}
		if i > 0 {
			prev := &ds.Segments[i-1]
			switch {
			case seg.First > next:
				// Entries between next and seg.First are gone: either the
				// previous segment's damage swallowed them or they are missing.
				if n := len(prev.Bad); n > 0 && prev.Bad[n-1].Offset+prev.Bad[n-1].Length == prev.Size && prev.Bad[n-1].Lost == 0 {
					prev.Bad[n-1].Lost = seg.First - prev.Bad[n-1].Seq
					ds.Bad[len(ds.Bad)-1].Lost = prev.Bad[n-1].Lost
				} else {
					b := BadEntry{Segment: prev.Segment.Name, Offset: prev.Size, Seq: next, Lost: seg.First - next, Reason: ReasonMissing}
					prev.Bad = append(prev.Bad, b)
					ds.Bad = append(ds.Bad, b)
				}
			case seg.First < next:
				b := BadEntry{Segment: seg.Name, Offset: 0, Seq: seg.First, Reason: fmt.Sprintf("segment starts at seq %d but the previous one ends at %d", seg.First, next-1)}
				ds.Bad = append(ds.Bad, b)
			}
		}
		// Damage at the end of a non-last segment has Lost 0 here; the
		// next segment's name tells how many entries it swallowed (above).
		last := i == len(segs)-1
		sc := scanSegment(seg, data, last, keep)
		if last && hasDamage(sc.Bad) {
			// A writer copying into preallocated space can be caught
			// half-way (zeros, then the end of its write): read once more
			// before calling it damage. A log nobody writes reads the same.
			if again, err := os.ReadFile(filepath.Join(dir, seg.Name)); err == nil {
				data = again
				sc = scanSegment(seg, data, last, keep)
			}
		}
		if st.Name != "" {
			st.Last = sc.Next - 1
			sc.Stat = st
		}
		ds.Segments = append(ds.Segments, sc)
		ds.Bad = append(ds.Bad, sc.Bad...)
		next = sc.Next
		if each != nil {
			if err := each(&ds.Segments[len(ds.Segments)-1], data); err != nil {
				if errors.Is(err, errStopScan) {
					return ds, nil
				}
				return ds, err
			}
		}
		if !keep {
			ds.Segments[len(ds.Segments)-1].Good = nil
		}
	}
	ds.Last = next - 1
	return ds, nil
}

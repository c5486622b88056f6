package wal

import (
	"fmt"
	"sort"

	"github.com/cmlab/cmlab/events"
)

// Frame is one entry of the log where it lies on disk: what the operator
// console shows beside each event (its segment, offset, size and whether
// its checksum holds).
type Frame struct {
	Seq     uint64
	Segment string // file name under wal/
	Offset  int64  // of the frame's length prefix in the segment
	Size    int    // bytes of the frame: length prefix and entry
	// Bad is why the frame is damaged ("" when its CRC, version and seq
	// hold); Event is nil then.
	Bad   string
	Event *events.Event
}

// SegmentOf returns the name and first seq of the retained segment of the
// log in dir that holds seq (by the segments' names), ok false when seq
// lies before the first segment.
func SegmentOf(dir string, seq uint64) (name string, first uint64, ok bool, err error) {
	segs, err := listSegments(dir)
	if err != nil {
		return "", 0, false, fmt.Errorf("wal: %w", err)
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].First > seq }) - 1
	if i < 0 {
		return "", 0, false, nil
	}
	return segs[i].Name, segs[i].First, true, nil
}

// SegmentRef names a segment file and its first seq.
type SegmentRef struct {
	Name  string
	First uint64
}

// SegmentList lists the segment files of the log in dir by their names,
// oldest first, reading no segment and no manifest (a reader that keeps
// the list checks it against the files it opens).
func SegmentList(dir string) ([]SegmentRef, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	out := make([]SegmentRef, len(segs))
	for i, s := range segs {
		out[i] = SegmentRef{Name: s.Name, First: s.First}
	}
	return out, nil
}

// FrameOffsets frames data, a segment's bytes from its offset base on,
// by their length prefixes: it appends to offs the offset in the file of
// each whole frame and returns them with the offset just after the last
// one. It stops at the end of data, at preallocated zeros, at a frame
// data holds only the start of (more says so: read on from end), or at
// damage (tail: why).
func FrameOffsets(data []byte, base int64, offs []int64) (out []int64, end int64, more bool, tail string) {
	p := 0
	for p < len(data) {
		if data[p] == 0 && allZero(data[p:]) {
			break
		}
		_, n, reason := frameAt(data, p)
		if reason == ReasonIncomplete {
			return offs, base + int64(p), true, ""
		}
		if reason != "" {
			return offs, base + int64(p), false, reason
		}
		offs = append(offs, base+int64(p))
		p += n
	}
	return offs, base + int64(p), false, ""
}

// CheckFrame checks b, the whole frame (length prefix and entry) at
// offset of segment, as the entry of seq: its length, version, CRC and
// stored seq (Bad says what is wrong).
func CheckFrame(b []byte, seq uint64, segment string, offset int64) (Frame, []byte) {
	f := Frame{Seq: seq, Segment: segment, Offset: offset, Size: len(b)}
	entry, n, reason := frameAt(b, 0)
	if reason == "" && n != len(b) {
		reason = ReasonBadLength
	}
	if reason == "" {
		var got uint64
		if got, reason = checkEntry(entry, seq); reason == "" && got != seq {
			reason = fmt.Sprintf("entry stores seq %d at index %d", got, seq)
		}
	}
	if reason != "" {
		f.Bad = reason
		return f, nil
	}
	return f, entry
}

// DecodeFrame decodes entry, which CheckFrame returned for f, into
// f.Event (f.Bad when it does not decode).
func DecodeFrame(f *Frame, entry []byte) {
	ev, err := DecodeEntry(entry, f.Seq)
	if err != nil {
		f.Bad = err.Error()
		return
	}
	f.Event = ev
}

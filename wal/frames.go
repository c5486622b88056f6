package wal

import (
	"fmt"
	"os"
	"path/filepath"
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

// PrevSegment returns the first seq of the retained segment before the
// one starting at first, ok false when there is none.
func PrevSegment(dir string, first uint64) (uint64, bool, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return 0, false, fmt.Errorf("wal: %w", err)
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].First >= first }) - 1
	if i < 0 {
		return 0, false, nil
	}
	return segs[i].First, true, nil
}

// ReadSegmentFrames yields the frames with from ≤ seq ≤ to of the one
// segment of dir named name (whose first seq is first), in order, without
// the log's lock: it reads the file once, as it is now. A damaged frame is
// yielded with its reason and ends the segment (what follows it cannot be
// framed with trust); zeros that end the file (preallocated space) end it
// silently, and so does a frame the writer has not finished.
func ReadSegmentFrames(dir, name string, first, from, to uint64, yield func(Frame) bool) error {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	next := first
	for p := 0; p < len(data) && next <= to; {
		if allZero(data[p:]) {
			return nil
		}
		entry, n, reason := frameAt(data, p)
		if reason == ReasonIncomplete {
			return nil // a write in progress at the end of the last segment
		}
		f := Frame{Seq: next, Segment: name, Offset: int64(p), Size: n}
		if reason == "" {
			var seq uint64
			if seq, reason = checkEntry(entry, next); reason == "" && seq != next {
				reason = fmt.Sprintf("entry stores seq %d at index %d", seq, next)
			}
		}
		if reason != "" {
			f.Bad = reason
			if next >= from {
				yield(f)
			}
			return nil
		}
		if next >= from {
			ev, err := DecodeEntry(entry, next)
			if err != nil {
				f.Bad = err.Error()
				yield(f)
				return nil
			}
			f.Event = ev
			if !yield(f) {
				return nil
			}
		}
		p += n
		next++
	}
	return nil
}

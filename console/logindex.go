package console

import (
	"io"
	"os"
	"slices"
	"time"

	"github.com/cmlab/cmlab/wal"
)

// The frame offsets of the segments pages read last are kept (indexKeep
// of them), so a page reads the bytes of the frames it looks at and not
// the whole segment: the newest page reads the end of the active segment,
// framing only what was appended since the last page; the next page of a
// filter or of older events reads on in the segment the last one read.
// Kept offsets are checked against the file (its size and mtime): a
// segment that grew is framed on from where it was, one that changed
// otherwise is framed again. A frame's bytes are checked (CRC, seq) every
// time they are read, so damage shows whatever was kept.

// indexKeep is how many segments' frame offsets are kept (8 bytes a
// frame: about 80 KiB for a 4 MiB segment of 400-byte events).
const indexKeep = 8

// indexChunk is how much of a segment one read frames (doubled for a
// frame larger than it); a page's budget is looked at between chunks,
// and a segment framed in part is kept in part, framed on by the next
// page.
const indexChunk = 256 << 10

// readWindow is how many bytes of frames a page reads at once.
const readWindow = 256 << 10

// segIndex is where each whole frame of one segment file starts.
type segIndex struct {
	name  string
	first uint64
	offs  []int64 // offs[i]: the frame of seq first+i
	end   int64   // just after the last whole frame
	tail  string  // why framing stopped before the file's end ("" for the end, zeros, a frame being written)
	size  int64   // the file's size and mtime when framed
	mod   time.Time
	// cut: framing stopped at the page's deadline, at end (the offsets
	// are right as far as they go).
	cut bool
}

// last is the seq of the last whole frame (first-1 when none).
func (x *segIndex) last() uint64 { return x.first + uint64(len(x.offs)) - 1 }

// frameEnd is where the frame of seq ends.
func (x *segIndex) frameEnd(seq uint64) int64 {
	i := int(seq - x.first)
	if i+1 < len(x.offs) {
		return x.offs[i+1]
	}
	return x.end
}

// index returns the frame offsets of segment name (first seq first),
// open as f, framing what is not kept, until deadline (then x.cut; the
// zero time: none); buf is a reusable read buffer, returned grown.
func (lr *LogReader) index(f *os.File, name string, first uint64, buf []byte, deadline time.Time) (*segIndex, []byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, buf, err
	}
	lr.mu.Lock()
	var kept *segIndex
	if i := slices.IndexFunc(lr.idx, func(x *segIndex) bool { return x.name == name && x.first == first }); i >= 0 {
		kept = lr.idx[i]
	}
	lr.mu.Unlock()
	if kept != nil && !kept.cut && kept.size == fi.Size() && kept.mod.Equal(fi.ModTime()) {
		lr.keep(kept)
		return kept, buf, nil
	}
	x := &segIndex{name: name, first: first, size: fi.Size(), mod: fi.ModTime()}
	from := int64(0)
	if kept != nil && kept.tail == "" && fi.Size() >= kept.end {
		// Appended to (the active segment), or framed in part by an
		// earlier page: frame on from the kept end.
		x.offs, from = slices.Clone(kept.offs), kept.end
	}
	chunk := indexChunk
	for chunks := 0; from < x.size; chunks++ {
		if chunks > 0 && !deadline.IsZero() && time.Now().After(deadline) {
			// At least one chunk a page: every page frames on.
			x.cut = true
			break
		}
		n := int(min(int64(chunk), x.size-from))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		got, err := f.ReadAt(buf[:n], from)
		if err != nil && err != io.EOF {
			return nil, buf, err
		}
		if got == 0 {
			break
		}
		offs, end, more, tail := wal.FrameOffsets(buf[:got], from, x.offs)
		x.offs = offs
		switch {
		case tail != "":
			x.tail, from = tail, end
		case more && from+int64(got) >= x.size:
			from = end // a frame the writer has not finished: the end for now
		case more && end == from:
			chunk *= 2 // one frame larger than the chunk
			continue
		case more || end == from+int64(got):
			from = end // read on
			continue
		default:
			from = end // preallocated zeros: the end of what is written
		}
		break
	}
	x.end = from
	lr.keep(x)
	return x, buf, nil
}

// keep puts x first among the kept offsets (replacing its segment's), at
// most indexKeep of them.
func (lr *LogReader) keep(x *segIndex) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.idx = slices.DeleteFunc(lr.idx, func(y *segIndex) bool { return y.name == x.name && y.first == x.first })
	lr.idx = slices.Insert(lr.idx, 0, x)
	if len(lr.idx) > indexKeep {
		clear(lr.idx[indexKeep:])
		lr.idx = lr.idx[:indexKeep]
	}
}

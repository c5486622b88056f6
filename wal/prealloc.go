package wal

import (
	"os"
	"sync"
)

// Preallocation: the tail segment is zero-filled ahead of the writer.
//
// An fsync after an append that grows a file must also commit the file's
// new size and block allocation, a journal commit on ext4; an fdatasync
// after overwriting blocks that already hold zeros commits only the data.
// On the machine cmlab was measured on, the second was 1.4–2× faster at
// the median and at the 99th percentile (the "sync probe" line of `cmlab
// bench wal`), and every group commit waits for that latency. So the committer
// keeps a stretch of zeros ahead of the data of the tail segment: the file
// on disk is the entries, then zeros up to a size that is a multiple of
// preallocUnit.
//
// The zeros are written by a background goroutine through a descriptor of
// its own, in small pieces each written back at once (so they never sit
// dirty in the page cache for a group's fdatasync to flush), one region at
// a time, always beyond the bytes the committer writes: before a group that
// would reach into a region still being written, the committer waits for it.
// A region ends at most at the segment size rounded down to preallocUnit,
// so a segment tidwall/wal closes (it cycles once its data reaches the
// segment size) holds no zeros: only the last segment can.
//
// Readers and Open know the shape: in the last segment, zero bytes from the
// first bad frame to the end of a file whose size is a multiple of
// preallocUnit are preallocated space, not damage (see preallocatedFrom).
// Open truncates them silently, Close truncates them before its final
// fsync. Zeros carry no data, so telling preallocated space from a crash's
// zero fill wrongly can lose nothing; a zero fill whose file size is not
// such a multiple is still a torn tail, quarantined and recorded.
const (
	// preallocUnit aligns the end of every preallocated region.
	preallocUnit = 1 << 20
	// defaultPreallocChunk is the size of one background region.
	defaultPreallocChunk = 4 << 20
	// preallocHeadroom: the first region of a segment created while the
	// log runs starts this far past its data, so that the committer can go
	// on writing (into a hole) while the region is being zero-filled.
	preallocHeadroom = 256 << 10
	pageSize         = 4096
)

// preallocatedFrom reports whether data[p:] is preallocated space: data
// are the bytes of the last segment from byte offset base to the end of
// the file, and everything from p on is zero in a file whose size is a
// multiple of preallocUnit.
func preallocatedFrom(data []byte, base int64, p int) bool {
	return preallocatedSize(base+int64(len(data))) && p < len(data) && allZero(data[p:])
}

// preallocatedSize reports whether a last segment of this many bytes may
// end in preallocated space: every region ends at a multiple of the unit.
func preallocatedSize(size int64) bool { return size > 0 && size%preallocUnit == 0 }

// trailingZeros is the length of the run of zero bytes ending data.
func trailingZeros(data []byte) int {
	n := 0
	// Whole chunks first (see allZero), then bytes.
	const chunk = 4096
	for len(data)-n >= chunk && allZero(data[len(data)-n-chunk:len(data)-n]) {
		n += chunk
	}
	for n < len(data) && data[len(data)-1-n] == 0 {
		n++
	}
	return n
}

func alignUp(x, a int64) int64   { return (x + a - 1) / a * a }
func alignDown(x, a int64) int64 { return x / a * a }

// zeroPiece is a buffer of zeros, one write's worth. It is only ever read.
// Small, so that each write holds the file's inode lock (which the
// committer's writes need too) only briefly.
var zeroPiece = sync.OnceValue(func() []byte { return make([]byte, 64<<10) })

// zeroFill writes zeros over [start, end) of the file at path, last piece
// first: the file's size jumps to end (a multiple of preallocUnit) with
// the first write, of one page, so a crash part-way leaves holes, which read as zeros,
// and not a stretch of zeros ending at an odd size. Each piece goes through
// the page cache and is written back at once (flushPiece): the zero pages
// stay cached, so the committer's partial-page writes into them never wait
// for a read from disk (they did, 50–70 µs each, when the zeros were
// written with O_DIRECT), and they are not left dirty for a group's
// fdatasync to flush. It then makes the new size durable with fdatasync,
// so that the journal commit it costs is not paid by a group commit.
func zeroFill(path string, start, end int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	zeros := zeroPiece()
	for hi := end; hi > start; {
		lo := max(start, hi-int64(len(zeros)))
		if hi == end {
			// The write that grows the file is one page: a write cut
			// short (a fatal signal stops a write between pages) would
			// leave the size at an odd place.
			lo = max(start, end-pageSize)
		}
		if _, err := f.WriteAt(zeros[:hi-lo], lo); err != nil {
			f.Close()
			return err
		}
		if err := flushPiece(f, lo, hi-lo); err != nil {
			f.Close()
			return err
		}
		hi = lo
	}
	if err := datasync(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// preallocator is the committer's side of preallocation for one log. Its
// fields are touched by the committer goroutine only (and by Open and
// Close, before and after it runs); the region in flight reports through
// done.
type preallocator struct {
	chunk int64 // bytes per background region
	max   int64 // no region ends past this (SegmentSize rounded down); 0: off
	alloc int64 // the tail segment's zeros end here (its file size); ≤ tail: none ahead
	off   bool  // a region failed: no more preallocation in this segment

	busy       chan struct{} // closed when the region in flight is done; nil if none
	start, end int64         // the region in flight
	err        error         // its result, read after busy is closed
}

func newPreallocator(segSize, chunk int) *preallocator {
	p := &preallocator{chunk: int64(chunk), max: alignDown(int64(segSize), preallocUnit)}
	if p.chunk < preallocUnit {
		p.chunk = preallocUnit
	}
	p.chunk = alignDown(p.chunk, preallocUnit)
	return p
}

// settle takes the result of a region that has finished; with wait it
// waits for one in flight.
func (p *preallocator) settle(wait bool) {
	if p.busy == nil {
		return
	}
	if !wait {
		select {
		case <-p.busy:
		default:
			return
		}
	}
	<-p.busy
	p.busy = nil
	if p.err != nil {
		// Best effort: an error here (ENOSPC, say) only means appends pay
		// for growing the file; a real write error will fail the log.
		p.off = true
		return
	}
	p.alloc = p.end
}

// mustWait reports whether writing up to byte `upto` of the tail segment
// would reach into the region in flight.
func (p *preallocator) mustWait(upto int64) bool {
	return p.busy != nil && upto > p.start
}

// next returns the region to fill next for a tail segment holding tail
// bytes, ok false when none is due: one is due when fewer than half a
// chunk of zeros lie ahead of the writer and none is in flight.
func (p *preallocator) next(tail int64, headroom int64) (start, end int64, ok bool) {
	if p.max == 0 || p.off || p.busy != nil || p.alloc-tail >= p.chunk/2 {
		return 0, 0, false
	}
	start = p.alloc
	end = alignDown(start+p.chunk, preallocUnit)
	if start <= tail {
		// Nothing ahead (a new segment, or the writer outran us): a
		// short region first, up to the next unit, so that it is done
		// before the writer crosses the headroom.
		start = alignUp(tail+headroom, pageSize)
		end = alignUp(start+1, preallocUnit)
	}
	end = min(end, p.max)
	if end <= start {
		return 0, 0, false
	}
	return start, end, true
}

// launch zero-fills [start, end) of path in the background.
func (p *preallocator) launch(path string, start, end int64) {
	done := make(chan struct{})
	p.busy, p.start, p.end, p.err = done, start, end, nil
	go func() {
		p.err = zeroFill(path, start, end)
		close(done)
	}()
}

// fill zero-fills [start, end) of path now (Open's first region).
func (p *preallocator) fill(path string, start, end int64) {
	if err := zeroFill(path, start, end); err != nil {
		p.off = true
		return
	}
	p.alloc = end
}

// newSegment resets the state for a segment tidwall just created.
func (p *preallocator) newSegment() {
	p.settle(true) // a region of the closed segment cannot be in flight, but be sure
	p.alloc, p.off = 0, false
}

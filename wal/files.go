package wal

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"

	"github.com/cmlab/cmlab/home"
	twal "github.com/tidwall/wal"
)

// Writer is the narrow file seam between the committer and the segment
// files: exactly the three calls a group commit makes. WriteBatch is called
// by the committer goroutine only; Sync and SyncDir by the syncer goroutine
// only, possibly while a WriteBatch runs.
//
// Why a seam here and not a virtual file system: tidwall/wal opens and
// writes its segment files with os.File directly, so faults cannot be
// injected below it. Every durability decision of the log, though, is made
// on the results of these three calls — a write error, a failed fsync, a
// short write that left part of a frame on disk — so wrapping them is
// enough to test that no such failure is ever acknowledged (see Faults).
type Writer interface {
	// WriteBatch appends entries, which carry the sequences first,
	// first+1, …, to the segment files without fsyncing them. It reports
	// whether a new segment file was created, whose directory entry must
	// then be fsynced before anything in it is acknowledged.
	WriteBatch(first uint64, entries [][]byte) (newSegment bool, err error)
	// Sync fsyncs the tail segment file, making durable every entry a
	// WriteBatch that returned before the call wrote.
	Sync() error
	// SyncDir fsyncs the log directory.
	SyncDir() error
}

// twalWriter is the real Writer over tidwall/wal.
//
// Sync does not call tidwall's Sync, which holds tidwall's mutex for the
// whole fsync and so would stall the next group's WriteBatch: it
// fdatasyncs the tail segment through a second descriptor of its own (sf),
// so the committer writes group k+1 while the syncer syncs group k. That is
// enough for every group written before the sync starts: a group's bytes
// lie either in the tail segment sf names or in an earlier segment, and
// tidwall fsyncs a segment (cycle) before it opens the next one, inside the
// WriteBatch that filled it; sf moves to the new segment only after that
// WriteBatch has returned without error.
//
// The writer also keeps zeros ahead of the data of the tail segment (see
// prealloc.go), so that most group commits overwrite allocated blocks.
type twalWriter struct {
	tw      *twal.Log
	dir     string
	segSize int
	tail    int // bytes in the tail segment, mirroring tidwall's len(ebuf); committer only
	batch   twal.Batch
	pre     *preallocator // nil: no preallocation
	seg     string        // the tail segment's file name; committer only
	tb      *tailBuf      // sizes tidwall's tail buffers ahead (tailbuf.go); nil if it cannot
	entries int           // entries in the tail segment written since Open; committer only

	mu sync.Mutex // guards sf; held across an fsync so that sf is never closed under it
	sf *os.File   // the tail segment, opened by us, for fsync
}

// newTwalWriter opens the writer's own descriptor of the tail segment of
// an opened tidwall log. With pre set it zero-fills the first region of
// the tail segment before returning.
func newTwalWriter(tw *twal.Log, dir string, segSize, tail int, pre *preallocator) (*twalWriter, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		return nil, errors.New("no segment file after open")
	}
	name := segs[len(segs)-1].Name
	sf, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	w := &twalWriter{tw: tw, dir: dir, segSize: segSize, tail: tail, sf: sf, pre: pre, seg: name,
		tb: newTailBuf(tw, segSize)}
	if w.tb != nil {
		w.tb.presize(0)
	}
	if pre != nil {
		// Open's region is the short first region of a segment, without
		// headroom, written now: the first groups already overwrite zeros
		// and Open stays quick.
		pre.alloc = int64(tail)
		if start, end, ok := pre.next(int64(tail), 0); ok {
			pre.fill(filepath.Join(dir, name), start, end)
		}
	}
	return w, nil
}

// WriteBatch mirrors tidwall's cycle rule to know whether the batch opened
// a new segment: tidwall cycles before a batch when the tail holds more
// than SegmentSize bytes, and after any entry that brings it to at least
// SegmentSize (even the batch's last, leaving a new empty segment).
func (w *twalWriter) WriteBatch(first uint64, entries [][]byte) (bool, error) {
	w.batch.Clear()
	tail, cycled, newTail := w.tail, false, uint64(0)
	if tail > w.segSize {
		tail, cycled, newTail = 0, true, first
	}
	n := 0 // bytes the batch appends
	for i, e := range entries {
		w.batch.Write(first+uint64(i), e)
		frame := uvarintLen(uint64(len(e))) + len(e)
		n += frame
		tail += frame
		if tail >= w.segSize {
			tail, cycled, newTail = 0, true, first+uint64(i)+1
		}
	}
	if w.pre != nil {
		w.pre.settle(false)
		if w.pre.mustWait(int64(w.tail + n)) {
			w.pre.settle(true) // the writer caught up with the zero-filling
		}
	}
	if err := w.tw.WriteBatch(&w.batch); err != nil {
		return cycled, err
	}
	w.tail = tail
	if w.tb != nil {
		if cycled {
			after := len(entries) - int(newTail-first) // entries in the new segment
			w.tb.presize(w.entries + len(entries) - after)
			w.entries = after
		} else {
			w.entries += len(entries)
		}
		if w.tail >= w.segSize/2 {
			w.tb.prepare()
		}
	}
	if cycled {
		// tidwall fsynced and closed every segment it filled; the new
		// tail is the file named after its first sequence.
		name := segmentName(newTail)
		sf, err := os.Open(filepath.Join(w.dir, name))
		if err != nil {
			return cycled, err
		}
		w.mu.Lock()
		old := w.sf
		w.sf = sf
		w.mu.Unlock()
		old.Close()
		w.seg = name
		if w.pre != nil {
			w.pre.newSegment()
		}
	}
	if w.pre != nil {
		if start, end, ok := w.pre.next(int64(w.tail), preallocHeadroom); ok {
			w.pre.launch(filepath.Join(w.dir, w.seg), start, end)
		}
	}
	return cycled, nil
}

// writeTorn writes b where the next entry would go, behind tidwall's back
// (the fault seam's short write).
func (w *twalWriter) writeTorn(b []byte) error {
	if w.pre != nil {
		w.pre.settle(true)
	}
	f, err := os.OpenFile(filepath.Join(w.dir, w.seg), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, int64(w.tail)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Sync fdatasyncs the tail segment through the writer's own descriptor:
// the entries and the file size needed to read them back (a new segment's
// directory entry is the caller's SyncDir). It may run concurrently with
// WriteBatch.
func (w *twalWriter) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sf == nil {
		return os.ErrClosed
	}
	return datasync(w.sf)
}

func (w *twalWriter) SyncDir() error { return home.SyncDir(w.dir) }

// close closes the writer's descriptor (without an fsync). With trim it
// first cuts the preallocated zeros off the tail segment; the caller's
// fsync (tidwall's Close) makes the cut durable. A failed log is not
// trimmed: its tail may hold a torn frame that the next Open must see.
func (w *twalWriter) close(trim bool) error {
	if w.tb != nil {
		w.tb.close()
	}
	var err error
	if w.pre != nil {
		w.pre.settle(true)
		if trim {
			// Even when a region failed part-way and alloc was not
			// advanced, the file may be longer than its entries.
			err = os.Truncate(filepath.Join(w.dir, w.seg), int64(w.tail))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sf != nil {
		w.sf.Close()
		w.sf = nil
	}
	return err
}

func uvarintLen(x uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], x)
}

// Faults injects failures into a log's Writer, for fault tests of this
// package and of the packages above it (a failed log is what the API
// reports as DEGRADED). Set Options.Faults; arm a fault at any time. Each
// armed fault fires once, on the next call of its kind.
type Faults struct {
	mu         sync.Mutex
	writeErr   error
	shortErr   error
	syncErr    error
	dirSyncErr error
	compactErr error
	fired      int
}

// FailCompactWrite makes the next file write of a compaction (a segment
// copied to the archive, or the manifest) fail with err before writing
// (ENOSPC is typical).
func (f *Faults) FailCompactWrite(err error) { f.mu.Lock(); f.compactErr = err; f.mu.Unlock() }

// FailWrite makes the next WriteBatch fail with err before writing anything.
func (f *Faults) FailWrite(err error) { f.mu.Lock(); f.writeErr = err; f.mu.Unlock() }

// ShortWrite makes the next WriteBatch write every entry but the last, then
// half of the last entry's frame, and fail with err (ENOSPC is typical):
// a torn frame is left on disk.
func (f *Faults) ShortWrite(err error) { f.mu.Lock(); f.shortErr = err; f.mu.Unlock() }

// FailSync makes the next Sync fail with err (after the write happened).
func (f *Faults) FailSync(err error) { f.mu.Lock(); f.syncErr = err; f.mu.Unlock() }

// FailDirSync makes the next SyncDir fail with err.
func (f *Faults) FailDirSync(err error) { f.mu.Lock(); f.dirSyncErr = err; f.mu.Unlock() }

// Fired is how many armed faults have fired.
func (f *Faults) Fired() int { f.mu.Lock(); defer f.mu.Unlock(); return f.fired }

func (f *Faults) take(p *error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := *p
	if err != nil {
		*p = nil
		f.fired++
	}
	return err
}

// faultyWriter applies Faults to the real writer.
type faultyWriter struct {
	w *twalWriter
	f *Faults
}

func (fw faultyWriter) WriteBatch(first uint64, entries [][]byte) (bool, error) {
	if err := fw.f.take(&fw.f.writeErr); err != nil {
		return false, err
	}
	if err := fw.f.take(&fw.f.shortErr); err != nil {
		n := len(entries) - 1
		cycled := false
		if n > 0 {
			var werr error
			if cycled, werr = fw.w.WriteBatch(first, entries[:n]); werr != nil {
				return cycled, werr
			}
		}
		// Half of the last frame, written behind tidwall's back where
		// the frame would start: the log is failed from here on and
		// never writes through tidwall again.
		last := entries[n]
		frame := binary.AppendUvarint(nil, uint64(len(last)))
		frame = append(frame, last...)
		if werr := fw.w.writeTorn(frame[:len(frame)/2]); werr != nil {
			return cycled, errors.Join(err, werr)
		}
		return cycled, err
	}
	return fw.w.WriteBatch(first, entries)
}

func (fw faultyWriter) Sync() error {
	if err := fw.f.take(&fw.f.syncErr); err != nil {
		return err
	}
	return fw.w.Sync()
}

func (fw faultyWriter) SyncDir() error {
	if err := fw.f.take(&fw.f.dirSyncErr); err != nil {
		return err
	}
	return fw.w.SyncDir()
}

package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cmlab/cmlab/home"
)

// verifiedName is the record of the sealed segments whose every entry a
// check read and found sound: wal/VERIFIED.
const (
	verifiedName    = "VERIFIED"
	verifiedVersion = 1
)

// verifiedRecord is wal/VERIFIED:
//
//	{"version":1,"segments":[{"name":"00000000000000000001","first":1,
//	  "last":9876,"size":4194400,"mtime_ns":1764000000000000000},...],
//	 "sum":123456789}
//
// Open with VerifyAfterOpen does not read a sealed segment listed there
// with its current size and mtime: it takes the segment to hold first..last
// (so a missing or cut segment is still refused at once) and leaves the
// check of its bytes to verifySealed. Any other segment is read at open.
// sum is the CRC-32C of the JSON with sum 0; a record that fails it, or
// cannot be read, is ignored (every segment is read).
type verifiedRecord struct {
	Version  int           `json:"version"`
	Segments []verifiedSeg `json:"segments"`
	// Archived are the archived segments (Name: their path) an Open read
	// whole and found sound and this home's (archive_open.go).
	Archived []verifiedSeg `json:"archived,omitempty"`
	Sum      uint32        `json:"sum"`
}

type verifiedSeg struct {
	Name    string `json:"name"`
	First   uint64 `json:"first"`
	Last    uint64 `json:"last"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
}

func (r *verifiedRecord) sumField() *uint32 { return &r.Sum }

// readVerified loads dir's wal/VERIFIED; nil when missing or not sound.
func readVerified(dir string) *verifiedRecord {
	b, err := os.ReadFile(filepath.Join(dir, verifiedName))
	if err != nil {
		return nil
	}
	var r verifiedRecord
	if json.Unmarshal(b, &r) != nil || r.Version != verifiedVersion || !soundRecord(&r) {
		return nil
	}
	return &r
}

// bySegment maps segment names to their records; empty (not nil) for a
// nil record, so that scanDirOpts records every segment it reads.
func (r *verifiedRecord) bySegment() map[string]verifiedSeg {
	m := map[string]verifiedSeg{}
	if r != nil {
		for _, s := range r.Segments {
			m[s.Name] = s
		}
	}
	return m
}

func (r *verifiedRecord) equal(o *verifiedRecord) bool {
	return o != nil && slices.Equal(r.Segments, o.Segments)
}

// writeVerified replaces dir's wal/VERIFIED with r (atomically).
func writeVerified(dir string, r *verifiedRecord, noSync bool) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	_ = noSync // home.WriteFileAtomic always fsyncs; the record is small
	return home.WriteFileAtomic(filepath.Join(dir, verifiedName), b)
}

// forgetVerified drops the named segments from wal/VERIFIED, so that the
// next Open reads (and refuses) them.
func forgetVerified(dir string, names []string) error {
	r := readVerified(dir)
	if r == nil {
		return nil
	}
	r.Segments = slices.DeleteFunc(r.Segments, func(s verifiedSeg) bool { return slices.Contains(names, s.Name) })
	return writeVerified(dir, r, false)
}

// VerifyReport is the outcome of the verification after open
// (Options.VerifyAfterOpen).
type VerifyReport struct {
	// Segments and Bytes: the sealed segments read, and their bytes.
	Segments int
	Bytes    int64
	// Err is nil when every sealed segment's entries are sound; a
	// *CorruptError (the log then failed with it) when damage was found;
	// ErrClosed when Close came first.
	Err error
	// Seconds is how long it took after Open returned.
	Seconds float64
}

// StartVerification starts the verification of the segments Open did not
// read (Options.VerifyAfterOpen) in a goroutine that Close waits for: the
// caller picks the moment (the daemon: once it serves), so that it does
// not compete with the start. Later calls do nothing.
func (l *Log) StartVerification() {
	l.verifyGo.Do(func() {
		if len(l.sealed) == 0 {
			close(l.verified)
			return
		}
		go l.verifySealed()
	})
}

// Verified returns a channel closed when the verification after open has
// ended (or, never started, at Close) and its report, valid once the
// channel is closed.
func (l *Log) Verified() (<-chan struct{}, func() VerifyReport) {
	return l.verified, func() VerifyReport {
		<-l.verified
		return l.verifyRep
	}
}

// verifySealed checks every entry of the segments that were sealed at
// Open, and that each one ends where the next begins, like Open's scan
// does without Options.VerifyAfterOpen. Damage fails the log: what Open
// would have refused with a *CorruptError is refused from then on, with
// the same error. A segment that compaction removed meanwhile is skipped.
func (l *Log) verifySealed() {
	defer close(l.verified)
	t0 := time.Now()
	rep := VerifyReport{}
	defer func() {
		rep.Seconds = time.Since(t0).Seconds()
		l.verifyRep = rep
	}()
	var bad []BadEntry
	var buf []byte // one buffer for every segment: memory does not grow with the log
	var busy time.Duration
	for _, seg := range l.sealed {
		// Throttled: after each segment it waits as long as the reading
		// took, so the check takes at most half of one core from serving.
		t := time.NewTimer(busy)
		select {
		case <-l.done:
			t.Stop()
			rep.Err = ErrClosed
			return
		case <-t.C:
		}
		t1 := time.Now()
		data, err := readWhole(filepath.Join(l.opts.Dir, seg.Name), buf)
		busy = time.Since(t1)
		if errors.Is(err, fs.ErrNotExist) {
			continue // compacted away
		}
		if err != nil {
			bad = append(bad, BadEntry{Segment: seg.Name, Seq: seg.First, Reason: fmt.Sprintf("unreadable: %v", err)})
			continue
		}
		buf = data[:0] // grown if it had to be: reused for the next segment
		rep.Segments++
		rep.Bytes += int64(len(data))
		sc := scanSegment(seg.segmentFile, data, false, false)
		busy = time.Since(t1)
		bad = append(bad, sc.Bad...)
		next := seg.next
		if len(sc.Bad) == 0 && sc.Next != next {
			switch {
			case sc.Next < next:
				bad = append(bad, BadEntry{Segment: seg.Name, Offset: sc.Size, Seq: sc.Next, Lost: next - sc.Next, Reason: ReasonMissing})
			default:
				bad = append(bad, BadEntry{Segment: segmentName(next), Offset: 0, Seq: next, Reason: fmt.Sprintf("segment starts at seq %d but the previous one ends at %d", next, sc.Next-1)})
			}
		}
	}
	if len(bad) > 0 {
		// The next Open reads these segments again and refuses them.
		var names []string
		for _, b := range bad {
			names = append(names, b.Segment)
		}
		forgetVerified(l.opts.Dir, names)
		cerr := &CorruptError{Dir: l.opts.Dir, Bad: bad}
		l.setFailed(fmt.Errorf("%w: verification after open: %w", ErrFailed, cerr))
		rep.Err = cerr
	}
}

// sealedSegment is a sealed segment Open did not read, and the first seq
// of the segment after it at Open (where its entries must end).
type sealedSegment struct {
	segmentFile
	next uint64
}

// readWhole reads the file at path into buf, grown to the file's size
// when too small.
func readWhole(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := int(fi.Size())
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	return buf[:n], nil // a file that shrank since Stat ends there
}

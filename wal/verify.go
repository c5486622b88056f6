package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

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
	for i, seg := range l.sealed {
		select {
		case <-l.done:
			rep.Err = ErrClosed
			return
		default:
		}
		data, err := os.ReadFile(filepath.Join(l.opts.Dir, seg.Name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // compacted away
		}
		if err != nil {
			bad = append(bad, BadEntry{Segment: seg.Name, Seq: seg.First, Reason: fmt.Sprintf("unreadable: %v", err)})
			continue
		}
		rep.Segments++
		rep.Bytes += int64(len(data))
		sc := scanSegment(seg, data, false, false)
		bad = append(bad, sc.Bad...)
		next := l.lastAtOpenAfter(i)
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
		cerr := &CorruptError{Dir: l.opts.Dir, Bad: bad}
		l.setFailed(fmt.Errorf("%w: verification after open: %w", ErrFailed, cerr))
		rep.Err = cerr
	}
}

// lastAtOpenAfter is the first seq of the segment after sealed[i] at Open.
func (l *Log) lastAtOpenAfter(i int) uint64 {
	if i+1 < len(l.sealed) {
		return l.sealed[i+1].First
	}
	return l.tailFirst
}

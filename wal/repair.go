package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// CorruptError is returned by Open for damage to acknowledged entries: a
// bad entry with a good one after it, or any bad entry in a segment before
// the last. It wraps ErrCorrupt. `cmlab recover --salvage` (Salvage) is
// the operator's way past it.
type CorruptError struct {
	Dir string
	Bad []BadEntry // every damaged stretch found, in log order
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %s: %s", ErrCorrupt, e.Dir, e.Bad[0])
	if len(e.Bad) > 1 {
		fmt.Fprintf(&b, " (and %d more damaged stretches)", len(e.Bad)-1)
	}
	return b.String()
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// repairTailRecords checks every entry of every segment in dir. Damage
// that is a torn tail (bad bytes running to the end of the last segment
// with no good entry after them) is cut: the bytes are copied to a
// quarantine file named after segment and offset and fsynced, then the
// segment is truncated and fsynced. Any other damage is refused with a
// *CorruptError and changes nothing. Preallocated zeros ending the last
// segment are truncated. It returns the wal.repaired records to append,
// oldest first — the earlier cuts at the same place whose records were
// never written (see unrecordedRepairs), then this cut — and the tail
// segment's size. noSync (Options.NoSync) skips the fsyncs.
func repairTailRecords(dir, qdir string, noSync bool) ([]*events.WalRepaired, int64, error) {
	reps, size, _, err := repairTail(dir, qdir, noSync, false, 0, false)
	return reps, size, err
}

// repairTail is repairTailRecords; with trustRecord the sealed segments
// wal/VERIFIED lists unchanged are not read (scanDirOpts) and are returned
// as sealed, for Log.verifySealed, each with the first seq of the segment
// after it;
// the others are read and checked now, and the record is rewritten to
// list every sealed segment. acked (Options.Acked) refuses a tail that
// holds acknowledged entries unless accept (Options.AcceptTailLoss); see
// acked.go.
func repairTail(dir, qdir string, noSync, trustRecord bool, acked uint64, accept bool) (reps []*events.WalRepaired, size int64, sealed []sealedSegment, err error) {
	var trust map[string]verifiedSeg
	var rec *verifiedRecord
	if trustRecord {
		rec = readVerified(dir)
		trust = rec.bySegment()
	}
	ds, err := scanDirOpts(dir, false, trust, nil)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("wal: scan %s: %w", dir, err)
	}
	ds.refuseAckedCut(acked, accept)
	reps, size, err = repairScanned(dir, qdir, noSync, ds)
	if err != nil {
		return nil, 0, nil, err
	}
	if n := len(ds.Segments); trustRecord && n > 0 {
		next := &verifiedRecord{Version: verifiedVersion}
		if rec != nil {
			next.Archived = rec.Archived // archive_open.go keeps them
		}
		for i, sc := range ds.Segments[:n-1] {
			if sc.Trusted {
				sealed = append(sealed, sealedSegment{segmentFile: sc.Segment, next: ds.Segments[i+1].Segment.First})
			}
			next.Segments = append(next.Segments, sc.Stat)
		}
		if !next.equal(rec) {
			// Best effort: without it the next open reads those segments.
			writeVerified(dir, next, noSync)
		}
	}
	return reps, size, sealed, nil
}

// repairScanned repairs the torn tail ds found, or refuses its damage.
func repairScanned(dir, qdir string, noSync bool, ds dirScan) ([]*events.WalRepaired, int64, error) {
	var torn *BadEntry
	var bad []BadEntry
	for i := range ds.Bad {
		if ds.Bad[i].TornTail {
			torn = &ds.Bad[i]
		} else {
			bad = append(bad, ds.Bad[i])
		}
	}
	if len(bad) > 0 {
		if torn != nil {
			bad = append(bad, *torn)
		}
		return nil, 0, &CorruptError{Dir: dir, Bad: bad}
	}
	var tailSize int64
	var tail *segmentScan
	if n := len(ds.Segments); n > 0 {
		tail = &ds.Segments[n-1]
		tailSize = tail.Size
	}
	if torn == nil {
		if tail == nil {
			return nil, 0, nil
		}
		if tail.Prealloc > 0 {
			// Preallocated zeros are not damage: cut without a trace, so
			// that tidwall/wal (which would read them as empty entries)
			// sees the entries only.
			tailSize -= tail.Prealloc
			if err := truncateSync(filepath.Join(dir, tail.Segment.Name), tailSize, noSync); err != nil {
				return nil, 0, fmt.Errorf("wal: trim preallocated space: %w", err)
			}
		}
		reps, err := unrecordedRepairsIn(dir, qdir, tail.Segment, tailSize)
		if err != nil {
			return nil, 0, fmt.Errorf("wal: repair: %w", err)
		}
		return reps, tailSize, nil
	}
	seg := filepath.Join(dir, torn.Segment)
	data, err := os.ReadFile(seg)
	if err != nil {
		return nil, 0, fmt.Errorf("wal: repair: %w", err)
	}
	if int64(len(data)) != torn.Offset+torn.Length+tail.Prealloc {
		return nil, 0, fmt.Errorf("wal: repair: %s changed size during open", seg)
	}
	// Cuts made before whose records were never written whole: an Open
	// that failed or died writing its wal.repaired events (a short write
	// leaves half a frame, cut now). Looked up before this cut's own
	// quarantine file exists.
	reps := unrecordedRepairs(qdir, tail.Segment, data[:torn.Offset], tailCuts(qdir, tail.Segment.Name))
	qname, err := quarantine(qdir, fmt.Sprintf("%s-at-%d.torn", torn.Segment, torn.Offset), data[torn.Offset:torn.Offset+torn.Length], noSync)
	if err != nil {
		return nil, 0, fmt.Errorf("wal: repair: %w", err)
	}
	if err := truncateSync(seg, torn.Offset, noSync); err != nil {
		return nil, 0, fmt.Errorf("wal: repair: %w", err)
	}
	return append(reps, &events.WalRepaired{
		Segment:    torn.Segment,
		Offset:     torn.Offset,
		Length:     torn.Length,
		Quarantine: qname,
		Reason:     torn.Reason,
		FirstSeq:   torn.Seq,
	}), torn.Offset, nil
}

// mkdirAll creates dir and, unless noSync, makes every directory it
// creates durable (home.MkdirAllSync): a new log directory must survive a
// power cut with the fsynced segments in it, and a new quarantine
// directory with the bytes cut from the log.
func mkdirAll(dir string, noSync bool) error {
	if noSync {
		return os.MkdirAll(dir, home.DirPerm)
	}
	return home.MkdirAllSync(dir)
}

// quarantine writes b to a new file in qdir named name (a numeric suffix is
// added if it exists), fsyncs it and qdir, and returns the file's name.
func quarantine(qdir, name string, b []byte, noSync bool) (string, error) {
	if err := mkdirAll(qdir, noSync); err != nil {
		return "", err
	}
	return home.WriteNew(qdir, func(i int) string {
		switch {
		case i == 0:
			return name
		case i > 1000:
			return ""
		}
		return fmt.Sprintf("%s.%d", name, i)
	}, b, noSync)
}

func truncateSync(path string, size int64, noSync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil && !noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// unrecordedRepairsIn is unrecordedRepairs for the first size bytes of
// segment seg of the log in dir; it reads the segment only if qdir holds
// cuts of it.
func unrecordedRepairsIn(dir, qdir string, seg segmentFile, size int64) ([]*events.WalRepaired, error) {
	cuts := tailCuts(qdir, seg.Name)
	if len(cuts) == 0 {
		return nil, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, seg.Name))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) < size {
		return nil, fmt.Errorf("%s shrank during open", seg.Name)
	}
	return unrecordedRepairs(qdir, seg, data[:size], cuts), nil
}

// tailCut is the quarantine file <seg>-at-<off>.torn[.k] of a tail cut.
type tailCut struct {
	off  int64
	k    int
	name string
}

// tailCuts lists the tail cuts of segment seg in qdir, ordered by offset
// and suffix (none if qdir cannot be read).
func tailCuts(qdir, seg string) []tailCut {
	des, err := os.ReadDir(qdir)
	if err != nil {
		return nil
	}
	var cuts []tailCut
	for _, de := range des {
		rest, ok := strings.CutPrefix(de.Name(), seg+"-at-")
		if !ok || de.IsDir() {
			continue
		}
		offText, suffix, ok := strings.Cut(rest, ".torn")
		off, err := strconv.ParseInt(offText, 10, 64)
		if !ok || err != nil || off < 0 {
			continue
		}
		k := 0
		if suffix != "" {
			kText, ok := strings.CutPrefix(suffix, ".")
			if k, err = strconv.Atoi(kText); !ok || err != nil || k < 1 {
				continue
			}
		}
		cuts = append(cuts, tailCut{off, k, de.Name()})
	}
	sort.Slice(cuts, func(i, j int) bool {
		if cuts[i].off != cuts[j].off {
			return cuts[i].off < cuts[j].off
		}
		return cuts[i].k < cuts[j].k
	})
	return cuts
}

// unrecordedRepairs finds, among the cuts of segment seg, those whose
// wal.repaired events are not in the log: an Open that cut a torn tail and
// crashed or failed before its events were written whole (a short write
// leaves half an event's frame, which the next Open cuts in turn, from the
// same or a later offset). data are the entries of seg up to where the
// next record goes. Each such cut lies at or after the start of the run of
// wal.repaired events ending data — at a cut, nothing but records is
// appended until an Open has written all of its own — so every cut with an
// offset in that stretch that no event of the run names is returned, in
// the order of cuts, its FirstSeq the sequence of the entry that now
// stands at its offset. (A stale quarantine file of an earlier log in the
// same place would be recorded too; nothing is lost by that.)
func unrecordedRepairs(qdir string, seg segmentFile, data []byte, cuts []tailCut) []*events.WalRepaired {
	if len(cuts) == 0 {
		return nil
	}
	sc := scanSegment(seg, data, true, true)
	seqAt := map[int64]uint64{int64(len(data)): sc.Next}
	for _, g := range sc.Good {
		seqAt[g.Off] = g.Seq
	}
	from := int64(len(data))
	recorded := map[string]bool{}
	for i := len(sc.Good) - 1; i >= 0; i-- {
		g := sc.Good[i]
		ev, err := DecodeEntry(g.Entry, g.Seq)
		if err != nil || ev.Type != events.TypeWalRepaired {
			break
		}
		r, err := events.DecodeAs[*events.WalRepaired](ev)
		if err != nil {
			break
		}
		recorded[r.Quarantine] = true
		from = g.Off
	}
	var out []*events.WalRepaired
	for _, c := range cuts {
		if c.off < from || c.off > int64(len(data)) || recorded[c.name] {
			continue
		}
		if r := unrecordedRepair(qdir, seg.Name, c.off, c.name); r != nil {
			r.FirstSeq = seqAt[c.off]
			out = append(out, r)
		}
	}
	return out
}

// unrecordedRepair is the record of the quarantine file name, a cut at
// seg:size; nil if it cannot be read or is empty.
func unrecordedRepair(qdir, seg string, size int64, name string) *events.WalRepaired {
	b, err := os.ReadFile(filepath.Join(qdir, name))
	if err != nil || len(b) == 0 {
		return nil
	}
	reason := ReasonIncomplete
	if allZero(b) {
		reason = ReasonZeroFill
	} else if b[0] == 0 {
		reason = ReasonZeroGap
	} else if entry, _, r := frameAt(b, 0); r != "" {
		reason = r
	} else if _, r := checkEntry(entry, 0); r != "" && r != ReasonSeq {
		reason = r
	}
	return &events.WalRepaired{Segment: seg, Offset: size, Length: int64(len(b)), Quarantine: name, Reason: reason + " (recorded at a later open)"}
}

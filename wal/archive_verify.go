package wal

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// ArchiveProblem is one thing wrong with where a compacted log's removed
// range is archived: a missing directory or segment file, an unreadable
// or damaged segment, an archive of another home.
type ArchiveProblem struct {
	Archive string `json:"archive"`
	// File is the missing, unreadable or damaged file (the directory when
	// the whole archive is missing).
	File  string `json:"file"`
	First uint64 `json:"first_seq"` // the sequences it concerns
	Last  uint64 `json:"last_seq"`
	// Kind: "missing", "damaged" or "foreign".
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	// Bad is the damaged stretch inside an archived segment.
	Bad *BadEntry `json:"bad,omitempty"`
}

func (p ArchiveProblem) String() string {
	if p.File == p.Archive {
		return fmt.Sprintf("archive %s (seq %d..%d): %s", p.File, p.First, p.Last, p.Reason)
	}
	return fmt.Sprintf("archived %s (seq %d..%d): %s", p.File, p.First, p.Last, p.Reason)
}

// Kinds of ArchiveProblem.
const (
	ArchiveMissing = "missing"
	ArchiveDamaged = "damaged"
	ArchiveForeign = "foreign"
)

// ArchiveReport is the outcome of VerifyArchives.
type ArchiveReport struct {
	Ranges   int    `json:"ranges"`   // archived ranges checked
	Segments int    `json:"segments"` // archived segment files found
	Entries  uint64 `json:"entries"`  // their entries (read, or as ARCHIVE records them)
	Bytes    int64  `json:"bytes"`
	// Deleted counts the sequences compaction deleted (no copy expected).
	Deleted  uint64           `json:"deleted"`
	Problems []ArchiveProblem `json:"problems"`
}

// OK reports whether every archived range is there and sound.
func (r ArchiveReport) OK() bool { return len(r.Problems) == 0 }

// archivedScan is one archived segment of a range as scanArchiveRange
// found it.
type archivedScan struct {
	seg  segmentFile
	scan *segmentScan // nil when taken from ARCHIVE without reading
	bad  []BadEntry
}

// VerifyArchives checks that every archived range of the log in dir's
// manifest is where the manifest says (or in override, when set): the
// directory, its owner (ARCHIVE), and a segment file for every sequence.
// With frames every archived segment is read and every entry checked as
// Verify checks the log's (frame, CRC, seq, envelope); without, a segment
// that ARCHIVE records with its current size is taken to hold what the
// record says (cmlab status: a stat per file), any other is read. A log
// never compacted has nothing to check.
func VerifyArchives(dir, override string, frames bool) (ArchiveReport, error) {
	return verifyArchives(dir, override, &archiveCheck{frames: frames})
}

// CheckArchives is VerifyArchives as Open checks the archive
// (archive_open.go), without recording what it read: a segment an Open
// read whole and recorded in wal/VERIFIED is taken as it was while its
// size and mtime are unchanged, any other is read and its frames and
// bytes checked (cmlab status).
func CheckArchives(dir, override string) (ArchiveReport, error) {
	// A log never compacted has no archive to check: wal/VERIFIED (a
	// record per sealed segment, 8% of a cmlab status on a 10M-event
	// home) is not read for it.
	if m, err := ReadManifest(dir); err != nil || m == nil {
		return ArchiveReport{Problems: []ArchiveProblem{}}, err
	}
	return verifyArchives(dir, override, newOpenCheck(readVerified(dir)))
}

func verifyArchives(dir, override string, chk *archiveCheck) (ArchiveReport, error) {
	rep := ArchiveReport{Problems: []ArchiveProblem{}}
	m, err := ReadManifest(dir)
	if err != nil {
		return rep, err
	}
	if m == nil {
		return rep, nil
	}
	for _, r := range m.Removed {
		if r.Archive == "" && override == "" {
			rep.Deleted += r.Last - r.First + 1
			continue
		}
		rep.Ranges++
		adir := cmp.Or(override, r.Archive)
		segs, probs := scanArchiveRange(adir, m, r, override != "", chk)
		rep.Problems = append(rep.Problems, probs...)
		for _, s := range segs {
			rep.Segments++
			if s.scan != nil {
				rep.Entries += uint64(s.scan.Count)
				rep.Bytes += s.scan.Size
			}
		}
		if a, _ := ReadArchiveIdentity(adir); a != nil {
			for _, s := range segs {
				if s.scan == nil {
					if rec := a.segment(s.seg.Name); rec != nil {
						rep.Entries += rec.Last - rec.First + 1
						rep.Bytes += rec.Size
					}
				}
			}
		}
	}
	return rep, nil
}

// scanArchiveRange lists and checks the segments of the removed range r
// in the archive directory adir (see VerifyArchives).
func scanArchiveRange(adir string, m *Manifest, r RemovedRange, override bool, chk *archiveCheck) ([]archivedScan, []ArchiveProblem) {
	frames := chk.frames
	var probs []ArchiveProblem
	problem := func(file string, first, last uint64, kind, reason string, bad *BadEntry) {
		probs = append(probs, ArchiveProblem{Archive: adir, File: file, First: first, Last: last, Kind: kind, Reason: reason, Bad: bad})
	}
	fi, err := os.Stat(adir)
	if err != nil || !fi.IsDir() {
		reason := "the archive directory is missing"
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			reason = fmt.Sprintf("the archive directory is unreadable: %v", err)
		} else if err == nil {
			reason = "not a directory"
		}
		problem(adir, r.First, r.Last, ArchiveMissing, reason, nil)
		return nil, probs
	}
	ident, err := checkArchiveOwner(adir, m.HomeID, override)
	if err != nil {
		kind := ArchiveForeign
		if errors.Is(err, ErrCorrupt) {
			kind = ArchiveDamaged
		}
		problem(filepath.Join(adir, archiveIdentityName), r.First, r.Last, kind, err.Error(), nil)
		if kind == ArchiveForeign {
			return nil, probs
		}
	}
	all, err := listSegments(adir)
	if err != nil {
		problem(adir, r.First, r.Last, ArchiveMissing, fmt.Sprintf("cannot list it: %v", err), nil)
		return nil, probs
	}
	var segs []segmentFile
	for _, s := range all {
		if s.First >= r.First && s.First <= r.Last {
			segs = append(segs, s)
		}
	}
	var out []archivedScan
	next := r.First
	for i, s := range segs {
		path := filepath.Join(adir, s.Name)
		switch {
		case s.First > next:
			problem(filepath.Join(adir, segmentName(next)), next, s.First-1, ArchiveMissing, "no archived segment holds these sequences", nil)
		case s.First < next:
			problem(path, s.First, next-1, ArchiveDamaged, fmt.Sprintf("segment starts at seq %d but the previous one ends at %d", s.First, next-1), nil)
		}
		end := r.Last + 1 // where this segment must end: the next one's start
		if i+1 < len(segs) {
			end = segs[i+1].First
		}
		if rec := ident.segment(s.Name); rec != nil && rec.First == s.First && rec.Last+1 <= end {
			end = rec.Last + 1 // recorded when archived: a missing next file still shows
		}
		st, err := os.Stat(path)
		if err != nil {
			problem(path, s.First, end-1, ArchiveMissing, fmt.Sprintf("unreadable: %v", err), nil)
			next = end
			continue
		}
		if last, ok := chk.trusted(path, s, st); ok {
			// Read whole and found sound by an earlier Open, unchanged since.
			out = append(out, archivedScan{seg: s})
			next = last + 1
			continue
		}
		if rec := ident.segment(s.Name); !frames && chk.trust == nil && rec != nil && rec.Size == st.Size() && rec.First == s.First {
			// Checked frame by frame when archived; still readable?
			f, err := os.Open(path)
			if err != nil {
				problem(path, s.First, end-1, ArchiveMissing, fmt.Sprintf("unreadable: %v", err), nil)
			} else {
				f.Close()
			}
			out = append(out, archivedScan{seg: s})
			next = rec.Last + 1
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			problem(path, s.First, end-1, ArchiveMissing, fmt.Sprintf("unreadable: %v", err), nil)
			next = end
			continue
		}
		sc := scanSegment(s, data, false, frames)
		var bad []BadEntry
		bad = append(bad, sc.Bad...)
		if frames {
			for _, g := range sc.Good {
				if _, err := DecodeEntry(g.Entry, g.Seq); err != nil {
					bad = append(bad, BadEntry{Segment: s.Name, Offset: g.Off, Length: g.Len, Seq: g.Seq, Reason: ReasonUndecodable})
				}
			}
			sc.Good = nil
		}
		if n := len(bad); n > 0 && bad[n-1].Lost == 0 && bad[n-1].Offset+bad[n-1].Length == sc.Size && end > bad[n-1].Seq && bad[n-1].Reason != ReasonUndecodable {
			// Damage running to the end: the next segment's name (or the
			// range's end) says how many entries it swallowed.
			bad[n-1].Lost = end - bad[n-1].Seq
		}
		if rec := ident.segment(s.Name); len(bad) == 0 && rec != nil && rec.CRC != 0 && rec.First == s.First && crc32.Checksum(data, castagnoli) != rec.CRC {
			problem(path, s.First, end-1, ArchiveForeign, fmt.Sprintf("its bytes are not those archived there (CRC-32C %08x, %s records %08x): a segment of another log, or of another copy of this one", crc32.Checksum(data, castagnoli), archiveIdentityName, rec.CRC), nil)
			next = end
			continue
		}
		if len(bad) == 0 {
			chk.sound(path, s, st, sc.Next-1)
		}
		for j := range bad {
			b := bad[j]
			last := b.Seq + max(b.Lost, 1) - 1
			problem(path, b.Seq, last, ArchiveDamaged, b.String(), &b)
		}
		out = append(out, archivedScan{seg: s, scan: &sc, bad: bad})
		if len(bad) > 0 {
			next = end // the damage is named; the rest is not missing too
		} else {
			next = sc.Next
		}
	}
	switch {
	case next <= r.Last:
		problem(filepath.Join(adir, segmentName(next)), next, r.Last, ArchiveMissing, "no archived segment holds these sequences", nil)
	case next > r.Last+1:
		problem(filepath.Join(adir, segmentName(segs[len(segs)-1].First)), r.Last+1, next-1, ArchiveDamaged, fmt.Sprintf("the archived segments run past the range's end (seq %d)", r.Last), nil)
	}
	return out, probs
}

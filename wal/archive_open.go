package wal

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The archive check at open. A compacted log's front lives in its
// archive; an Open that did not look there would serve, write and compact
// a home whose history is gone or is another home's (issue 27). Open
// therefore checks every archived range the manifest names (or
// Options.Archive) as scanArchiveRange does, cheaply:
//
//   - the archive directory is there, a directory, and this home's (its
//     ARCHIVE record names this home's id, or none for an archive made
//     before home ids);
//   - every seq of each range lies in a segment file there;
//   - a segment that an earlier Open read whole and found sound (frames,
//     CRCs, seqs, and the bytes ARCHIVE recorded when it was archived) is
//     taken as it was when its size and mtime are unchanged: a stat. Any
//     other is read whole and checked, then recorded (wal/VERIFIED,
//     "archived"), so each archived segment is read once after it
//     changes, not at every open.
//
// A problem refuses the open with an *ArchiveError naming each file and
// what it concerns; `cmlab wal verify` reads every archived entry whatever
// the record says.

// ArchiveError is returned by Open when an archived range of the log is
// missing, damaged or another home's. It wraps ErrArchive.
type ArchiveError struct {
	Report ArchiveReport
}

// ErrArchive is wrapped by *ArchiveError.
var ErrArchive = errors.New("wal: the log's archive is incomplete or damaged")

func (e *ArchiveError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d problem(s):", ErrArchive, len(e.Report.Problems))
	for _, p := range e.Report.Problems {
		b.WriteString("\n    " + p.String())
	}
	b.WriteString("\n  fix: restore the archive (put its files back where wal/MANIFEST says, or pass --archive DIR where they are now); 'cmlab wal verify' names every problem and its fix")
	return b.String()
}

func (e *ArchiveError) Unwrap() error { return ErrArchive }

// archiveCheck says how scanArchiveRange checks archived segments.
type archiveCheck struct {
	// frames: read every segment and decode every entry (wal verify).
	frames bool
	// trust (Open): the segments read whole and sound before, by path; a
	// segment not there (or changed) is read whole, and one found sound is
	// added to seen. nil: ARCHIVE's record of a segment's size stands for
	// a read (cmlab status).
	trust map[string]verifiedSeg
	seen  []verifiedSeg
}

// newOpenCheck is the archive check of Open, trusting what rec (nil:
// none) records as read whole and sound.
func newOpenCheck(rec *verifiedRecord) *archiveCheck {
	chk := &archiveCheck{trust: map[string]verifiedSeg{}}
	if rec != nil {
		for _, s := range rec.Archived {
			chk.trust[s.Name] = s
		}
	}
	return chk
}

// trusted reports whether the archived segment s at path, as st, was read
// whole and sound before and is unchanged since; last is its last seq.
func (c *archiveCheck) trusted(path string, s segmentFile, st os.FileInfo) (last uint64, ok bool) {
	if c.trust == nil || c.frames {
		return 0, false
	}
	t, ok := c.trust[path]
	if !ok || t.First != s.First || t.Size != st.Size() || t.MtimeNs != st.ModTime().UnixNano() || t.Last < s.First {
		return 0, false
	}
	c.seen = append(c.seen, t)
	return t.Last, true
}

// sound records that the archived segment s at path, as st, was read
// whole and found sound, holding seqs through last.
func (c *archiveCheck) sound(path string, s segmentFile, st os.FileInfo, last uint64) {
	if c.trust == nil {
		return
	}
	c.seen = append(c.seen, verifiedSeg{Name: path, First: s.First, Last: last, Size: st.Size(), MtimeNs: st.ModTime().UnixNano()})
}

// checkArchivesAtOpen checks the archived ranges of the log in dir whose
// manifest is m (nil: never compacted) as the top of this file says,
// override (Options.Archive) standing for the manifest's directories.
func checkArchivesAtOpen(dir, override string, m *Manifest, noSync bool) error {
	if m == nil {
		return nil
	}
	rec := readVerified(dir)
	chk := newOpenCheck(rec)
	rep := ArchiveReport{}
	for _, r := range m.Removed {
		if r.Archive == "" && override == "" {
			continue // deleted by compaction: no copy expected
		}
		rep.Ranges++
		_, probs := scanArchiveRange(cmp.Or(override, r.Archive), m, r, override != "", chk)
		rep.Problems = append(rep.Problems, probs...)
	}
	if len(rep.Problems) > 0 {
		return &ArchiveError{Report: rep}
	}
	slices.SortFunc(chk.seen, func(a, b verifiedSeg) int { return strings.Compare(a.Name, b.Name) })
	var old []verifiedSeg
	if rec != nil {
		old = rec.Archived
	}
	if !slices.Equal(old, chk.seen) {
		next := &verifiedRecord{Version: verifiedVersion}
		if rec != nil {
			next.Segments = rec.Segments
		}
		next.Archived = chk.seen
		// Best effort: without it the next open reads them again.
		writeVerified(dir, next, noSync)
	}
	return nil
}

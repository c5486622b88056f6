package wal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrBadManifest is wrapped (with ErrCorrupt) by errors about a wal/MANIFEST
// that cannot be trusted — it does not parse, fails its sum, contradicts
// itself or the segments — or that is missing from a log starting past
// seq 1. The log's front then lies in an archive (or was deleted) and
// only the manifest said so: the fix is RepairManifest (`cmlab compact
// --repair-manifest`), never Salvage, which would write placeholders over
// history the archive still holds.
var ErrBadManifest = errors.New("wal: wal/MANIFEST damaged or missing")

// Is makes a *CorruptError match ErrBadManifest when one of its damaged
// places is the manifest, or the log's front missing without one.
func (e *CorruptError) Is(target error) bool {
	if target != ErrBadManifest {
		return false
	}
	for _, b := range e.Bad {
		if b.Segment == manifestName || b.Reason == ReasonNoManifest {
			return true
		}
	}
	return false
}

// RepairOptions configure RepairManifest.
type RepairOptions struct {
	// Archives are directories where the segments of the log's front may
	// be, besides those a damaged manifest still names.
	Archives []string
	// HomeID is this home's id: archives recording another are not used.
	// Empty: the id the archives used record (RepairReport.HomeID).
	HomeID string
	// Deleted records the sequences no archive holds as deleted by a
	// compaction without an archive; without it they are an error.
	Deleted bool
	// QuarantineDir receives the old manifest's bytes.
	QuarantineDir string
	Now           func() time.Time
}

// RepairReport says what RepairManifest found and did.
type RepairReport struct {
	Dir string `json:"dir"`
	// Was is what was wrong: "missing", "damaged: …", or "sound" (then
	// only the home id and the archives' records were added, if missing).
	Was      string         `json:"was"`
	FirstSeq uint64         `json:"first_seq"`
	Removed  []RemovedRange `json:"removed"`
	HomeID   string         `json:"home_id,omitempty"`
	// Quarantined is the file keeping the old manifest's bytes.
	Quarantined string `json:"quarantined,omitempty"`
	// Skipped are archive directories not used, with why.
	Skipped []string `json:"skipped,omitempty"`
	Written bool     `json:"written"`
}

// RepairManifest rebuilds wal/MANIFEST of the log in dir (which it locks)
// from what is on disk: the first segment in dir is the first retained
// seq; the sequences before it are looked for, segment by segment from
// seq 1, in o.Archives and in the archive directories the old manifest
// names (when its JSON still parses), each segment read and checked frame
// by frame. Every sequence must be found (or, with o.Deleted, is recorded
// as deleted), or nothing is written and the error names the missing
// ranges. The old manifest's bytes go to quarantine, the new one is
// written atomically, and each archive used gets its ARCHIVE record. No
// segment is read from, written to or removed from dir besides the
// manifest.
//
// A sound manifest is kept: only a missing home id and the ARCHIVE
// records of its archives are added (a home compacted before home ids).
func RepairManifest(dir string, o RepairOptions) (RepairReport, error) {
	rep := RepairReport{Dir: dir, Removed: []RemovedRange{}}
	if o.Now == nil {
		o.Now = time.Now
	}
	lock, err := lockDir(dir)
	if err != nil {
		return rep, err
	}
	defer lock.release()
	segs, err := listSegments(dir)
	if err != nil {
		return rep, fmt.Errorf("wal: repair manifest: %w", err)
	}
	old, oldErr := ReadManifest(dir)
	raw, rawErr := os.ReadFile(filepath.Join(dir, manifestName))
	switch {
	case oldErr == nil && old == nil:
		rep.Was = "missing"
	case oldErr == nil:
		if _, kept := retainedSegments(segs, old.firstSeq()); len(kept) > 0 && kept[0].First == old.firstSeq() {
			return rep, recordIdentities(dir, old, o, &rep)
		}
		rep.Was = fmt.Sprintf("damaged: first_seq %d has no segment", old.firstSeq())
	default:
		rep.Was = "damaged: " + strings.TrimPrefix(oldErr.Error(), ErrCorrupt.Error()+": ")
	}
	if len(segs) == 0 {
		return rep, fmt.Errorf("wal: repair manifest: %s holds no segment: nothing to rebuild wal/%s from", dir, manifestName)
	}
	// Hints from a damaged manifest whose JSON still parses.
	var hint Manifest
	candidates := slices.Clone(o.Archives)
	if rawErr == nil && json.Unmarshal(raw, &hint) == nil {
		for _, r := range hint.Removed {
			if r.Archive != "" {
				candidates = append(candidates, r.Archive)
			}
		}
	}
	x := segs[0].First
	rep.FirstSeq = x
	// Where each archived segment before x is, first directory first.
	type found struct {
		dir string
		seg segmentFile
	}
	at := map[uint64][]found{}
	var starts []uint64
	seen := map[string]bool{}
	homeID := o.HomeID
	var used []string
	for _, c := range candidates {
		abs, err := checkArchive(dir, c)
		if err != nil {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		real, _ := realPath(abs)
		if seen[real] {
			continue
		}
		seen[real] = true
		ident, err := checkArchiveOwner(abs, homeID, false)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", abs, err))
			continue
		}
		if homeID == "" && ident != nil {
			homeID = ident.HomeID
		}
		list, err := listSegments(abs)
		if err != nil {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", abs, err))
			continue
		}
		for _, s := range list {
			if s.First < x {
				if len(at[s.First]) == 0 {
					starts = append(starts, s.First)
				}
				at[s.First] = append(at[s.First], found{abs, s})
			}
		}
	}
	slices.Sort(starts)
	nextStart := func(after uint64) uint64 {
		for _, s := range starts {
			if s > after {
				return s
			}
		}
		return x
	}
	var missing []string
	now := o.Now().UnixMilli()
	add := func(r RemovedRange) {
		if n := len(rep.Removed); n > 0 && rep.Removed[n-1].Archive == r.Archive && rep.Removed[n-1].Last+1 == r.First {
			p := &rep.Removed[n-1]
			p.Last, p.Segments, p.Bytes = r.Last, p.Segments+r.Segments, p.Bytes+r.Bytes
			return
		}
		rep.Removed = append(rep.Removed, r)
	}
	records := map[string][]ArchivedSegment{}
	for next := uint64(1); next < x; {
		cands := at[next]
		if len(cands) == 0 {
			g := nextStart(next)
			if o.Deleted {
				add(RemovedRange{First: next, Last: g - 1, At: now})
			} else {
				missing = append(missing, fmt.Sprintf("%d..%d", next, g-1))
			}
			next = g
			continue
		}
		// The first sound copy; a damaged one only when none is sound
		// (wal verify names it, salvage keeps its intact entries).
		var pick *found
		var end uint64
		var size int64
		for i := range cands {
			data, err := os.ReadFile(filepath.Join(cands[i].dir, cands[i].seg.Name))
			if err != nil {
				continue
			}
			sc := scanSegment(cands[i].seg, data, false, false)
			if len(sc.Bad) == 0 {
				pick, end, size = &cands[i], sc.Next, int64(len(data))
				break
			}
			if pick == nil {
				pick, size = &cands[i], int64(len(data))
				end = nextStart(next)
				if a, _ := ReadArchiveIdentity(cands[i].dir); a.segment(cands[i].seg.Name) != nil {
					end = a.segment(cands[i].seg.Name).Last + 1
				}
			}
		}
		if pick == nil {
			missing = append(missing, fmt.Sprintf("%d..%d (unreadable)", next, nextStart(next)-1))
			next = nextStart(next)
			continue
		}
		if end > x {
			return rep, fmt.Errorf("wal: repair manifest: archived segment %s runs to seq %d, past the log's first segment %s: not this log's archive?", filepath.Join(pick.dir, pick.seg.Name), end-1, segmentName(x))
		}
		if end <= next {
			end = nextStart(next) // an empty or wholly damaged copy: its name and the next say its range
		}
		add(RemovedRange{First: next, Last: end - 1, Segments: 1, Bytes: size, Archive: pick.dir, At: now})
		if !slices.Contains(used, pick.dir) {
			used = append(used, pick.dir)
		}
		records[pick.dir] = append(records[pick.dir], ArchivedSegment{Name: pick.seg.Name, First: next, Last: end - 1, Size: size})
		next = end
	}
	if len(missing) > 0 {
		var named []string
		for _, c := range candidates {
			named = append(named, c)
		}
		where := "no archive directory was given"
		if len(named) > 0 {
			where = "looked in " + strings.Join(named, ", ")
		}
		return rep, fmt.Errorf("wal: repair manifest: the log starts at seq %d and no archive holds seqs %s (%s); nothing was written: pass --archive DIR where their segment files are, or --deleted if a compaction without --archive deleted them", x, strings.Join(missing, ", "), where)
	}
	rep.HomeID = homeID
	m := &Manifest{FirstSeq: x, Removed: rep.Removed, CompactedAt: now, HomeID: homeID}
	if x == 1 {
		m.Removed = nil
	}
	if rawErr == nil && o.QuarantineDir != "" {
		q, err := quarantine(o.QuarantineDir, fmt.Sprintf("%s-%d.broken", manifestName, now), raw, false)
		if err != nil {
			return rep, fmt.Errorf("wal: repair manifest: keep the old one: %w", err)
		}
		rep.Quarantined = q
	}
	for _, d := range used {
		a, _ := ReadArchiveIdentity(d)
		if a == nil {
			a = &ArchiveIdentity{}
		}
		if homeID != "" {
			a.HomeID = homeID
		}
		for _, r := range records[d] {
			if a.segment(r.Name) == nil {
				a.Segments = append(a.Segments, r)
			}
		}
		if err := writeArchiveIdentity(d, a); err != nil {
			return rep, fmt.Errorf("wal: repair manifest: %w", err)
		}
	}
	if err := writeManifest(nil, dir, m, false); err != nil {
		return rep, fmt.Errorf("wal: repair manifest: %w", err)
	}
	rep.Written = true
	return rep, nil
}

// recordIdentities is RepairManifest on a sound manifest: the home id
// goes into it when missing, and each archive directory that exists and
// records no segments gets its ARCHIVE (each segment checked frame by
// frame). Sequences are not touched.
func recordIdentities(dir string, m *Manifest, o RepairOptions, rep *RepairReport) error {
	rep.Was = "sound"
	rep.FirstSeq = m.firstSeq()
	rep.Removed = m.Removed
	homeID := m.HomeID
	if homeID == "" {
		homeID = o.HomeID
	}
	rep.HomeID = homeID
	for _, r := range m.Removed {
		adir := r.Archive
		if adir == "" {
			continue
		}
		if len(o.Archives) > 0 {
			adir = o.Archives[0]
		}
		segs, probs := scanArchiveRange(adir, m, r, false, &archiveCheck{frames: true})
		if len(probs) > 0 {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %s (wal verify names every problem)", adir, probs[0]))
			continue
		}
		a, err := checkArchiveOwner(adir, homeID, false)
		if err != nil {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", adir, err))
			continue
		}
		if a == nil {
			a = &ArchiveIdentity{}
		}
		changed := a.HomeID != homeID && homeID != ""
		if homeID != "" {
			a.HomeID = homeID
		}
		for _, s := range segs {
			if s.scan != nil && a.segment(s.seg.Name) == nil {
				a.Segments = append(a.Segments, ArchivedSegment{Name: s.seg.Name, First: s.seg.First, Last: s.scan.Next - 1, Size: s.scan.Size})
				changed = true
			}
		}
		if changed {
			if err := writeArchiveIdentity(adir, a); err != nil {
				return fmt.Errorf("wal: repair manifest: %w", err)
			}
			rep.Written = true
		}
	}
	if m.HomeID == "" && homeID != "" {
		c := *m
		c.HomeID = homeID
		if err := writeManifest(nil, dir, &c, false); err != nil {
			return fmt.Errorf("wal: repair manifest: %w", err)
		}
		rep.Written = true
	}
	return nil
}

// CheckFront checks, without reading a segment, that the log in dir
// starts where it should: wal/MANIFEST sound, and a log without one
// starting at seq 1. The error wraps ErrBadManifest (and ErrCorrupt);
// `cmlab status` uses it, which otherwise reads only the log's end.
func CheckFront(dir string) error {
	var m *Manifest
	var segs []segmentFile
	// A compaction running beside (the daemon's) writes the manifest, then
	// removes segments: read the manifest again after the listing, and
	// look again when it changed meanwhile.
	for try := 0; ; try++ {
		m1, err := ReadManifest(dir)
		if err != nil {
			return err
		}
		if segs, err = listSegments(dir); err != nil || len(segs) == 0 {
			return nil
		}
		m2, err := ReadManifest(dir)
		if err != nil {
			return err
		}
		m = m2
		if m1.firstSeq() == m2.firstSeq() || try == 3 {
			break
		}
	}
	if m == nil && segs[0].First > 1 {
		return &CorruptError{Dir: dir, Bad: []BadEntry{{Segment: segmentName(1), Seq: 1, Lost: segs[0].First - 1, Reason: ReasonNoManifest}}}
	}
	if m != nil {
		if _, kept := retainedSegments(segs, m.firstSeq()); len(kept) == 0 || kept[0].First != m.firstSeq() {
			return &CorruptError{Dir: dir, Bad: []BadEntry{{Segment: manifestName, Seq: m.firstSeq(), Reason: fmt.Sprintf("missing segment: wal/%s says the log starts at seq %d, but no segment starts there", manifestName, m.firstSeq())}}}
		}
	}
	return nil
}

// ArchiveGaps returns the runs of seqs before the first segment of the
// log in dir that no segment file in the archive directory archive holds
// (each of its segments read to find where it ends): what a repair must
// find elsewhere (the home's stream) before it can name archive for them.
func ArchiveGaps(dir, archive string) ([]LostRange, error) {
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		return nil, err
	}
	x := segs[0].First
	var have []segmentFile
	if list, err := listSegments(archive); err == nil {
		for _, s := range list {
			if s.First < x {
				have = append(have, s)
			}
		}
	}
	var gaps []LostRange
	next := uint64(1)
	for _, s := range have {
		if s.First > next {
			gaps = append(gaps, LostRange{next, s.First - 1})
		}
		data, err := os.ReadFile(filepath.Join(archive, s.Name))
		if err != nil {
			return nil, err
		}
		sc := scanSegment(s, data, false, false)
		next = max(next, sc.Next)
	}
	if next < x {
		gaps = append(gaps, LostRange{next, x - 1})
	}
	return gaps, nil
}

// WriteArchivedSegment writes entries (the log entry bytes of seqs first,
// first+1, …, each checked: frame, CRC, seq) as the segment file of first
// in the archive directory archive: temporary file, fsync, rename,
// directory fsync. An existing file is never replaced.
func WriteArchivedSegment(archive string, first uint64, entries [][]byte) error {
	var out []byte
	for i, e := range entries {
		if _, reason := checkEntry(e, first+uint64(i)); reason != "" {
			return fmt.Errorf("%w: seq %d: %s", ErrCorrupt, first+uint64(i), reason)
		}
		out = binary.AppendUvarint(out, uint64(len(e)))
		out = append(out, e...)
	}
	if err := mkdirAll(archive, false); err != nil {
		return err
	}
	dst := filepath.Join(archive, segmentName(first))
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%w: %s exists", ErrBadArchive, dst)
	}
	return writeDurable(nil, dst, out, false, false)
}

package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// Neighbour is a good entry next to a lost one.
type Neighbour struct {
	Seq    uint64 `json:"seq"`
	Type   string `json:"type"`
	Stream string `json:"stream"`
	TS     int64  `json:"ts"`
}

// LostEntry is one sequence whose entry was destroyed and replaced by a
// wal.salvaged placeholder.
type LostEntry struct {
	Seq        uint64     `json:"seq"`
	Segment    string     `json:"segment"`
	Offset     int64      `json:"offset"` // of the damaged stretch
	Length     int64      `json:"length"` // of the damaged stretch
	Reason     string     `json:"reason"`
	Quarantine string     `json:"quarantine,omitempty"` // file holding the damaged bytes
	Prev       *Neighbour `json:"prev,omitempty"`
	Next       *Neighbour `json:"next,omitempty"`
	Guess      string     `json:"guess,omitempty"`
}

// SalvageReport says what Salvage did.
type SalvageReport struct {
	Dir       string      `json:"dir"`
	Rewritten []string    `json:"rewritten"` // segment files replaced
	Lost      []LostEntry `json:"lost"`
	// Dropped are damaged stretches that held no sequence (junk between
	// entries); their bytes are quarantined and removed.
	Dropped     []BadEntry `json:"dropped,omitempty"`
	Quarantined []string   `json:"quarantined,omitempty"`
	// Recovered are the lost seqs whose entries SalvageOptions.Fetch gave
	// back (a copy elsewhere, e.g. the home's stream): written byte for
	// byte instead of placeholders.
	Recovered []uint64 `json:"recovered,omitempty"`

	fetch func(seq uint64) ([]byte, error)
}

// LostRange is a run of sequences a salvage is about to replace.
type LostRange struct{ First, Last uint64 }

// Salvage repairs corruption of acknowledged entries anywhere in the log
// in dir, which it locks. Every intact entry is kept byte for byte; the
// bytes of each damaged stretch are copied to quarantineDir; each lost
// entry is replaced by an events.WalSalvaged placeholder at the same seq,
// so sequences stay gapless; each affected segment file is rewritten
// atomically (temporary file, fsync, rename, directory fsync). A torn tail
// of the last segment is left for Open to repair (and record). It is the
// operator's explicit way past an Open that refused with ErrCorrupt.
func Salvage(dir, quarantineDir string) (SalvageReport, error) {
	return SalvageWith(dir, SalvageOptions{QuarantineDir: quarantineDir})
}

// SalvageOptions configure SalvageWith.
type SalvageOptions struct {
	// QuarantineDir receives the damaged bytes.
	QuarantineDir string
	// BeforeRewrite, when set, is called once after every check and
	// before the first byte is written, with the sequences about to be
	// lost (the caller refuses when a copy of them exists elsewhere and
	// Fetch is not set, or marks its views stale), and not at all when
	// nothing is salvaged or Salvage refuses: a refused salvage leaves the
	// home as it was.
	BeforeRewrite func(lost []LostRange) error
	// Fetch, when set, returns the entry bytes of a lost seq from a copy
	// (nil when it has none); a salvage writes them instead of a
	// placeholder, after checking their frame, CRC and seq.
	Fetch func(seq uint64) ([]byte, error)
}

// SalvageWith is Salvage. Archived segments of a compacted log (in the
// archive directories wal/MANIFEST names, when they are this home's) are
// salvaged like the log's own: each damaged one is rewritten in its
// archive with placeholders for its lost entries, and its ARCHIVE record
// follows. Missing archived segments are not salvaged: nothing there to
// keep (the fix is restoring the archive). A damaged or missing manifest
// is refused (ErrBadManifest): RepairManifest is its fix.
func SalvageWith(dir string, o SalvageOptions) (SalvageReport, error) {
	quarantineDir := o.QuarantineDir
	rep := SalvageReport{Dir: dir, fetch: o.Fetch}
	lock, err := lockDir(dir)
	if err != nil {
		return rep, err
	}
	defer lock.release()
	// Temporary files of an interrupted salvage are incomplete copies.
	if leftovers, err := filepath.Glob(filepath.Join(dir, ".*.tmp*")); err == nil {
		for _, f := range leftovers {
			os.Remove(f)
		}
	}
	ds, err := scanDir(dir, false, nil)
	if err != nil {
		return rep, fmt.Errorf("wal: salvage: %w", err)
	}
	// A damaged or missing manifest: the front it names lies in an
	// archive (or was deleted), and placeholders would replace history
	// the archive still holds. Repair the manifest instead.
	if ce := (&CorruptError{Dir: dir, Bad: ds.Bad}); errors.Is(ce, ErrBadManifest) {
		return rep, fmt.Errorf("wal: salvage refused: %w: %w (rebuild it from the segments on disk with 'cmlab compact --repair-manifest --archive DIR'; salvage would put placeholders where an archive may still hold the events)", ErrBadManifest, ce)
	}
	head := len(ds.Segments) > 0 && ds.Segments[0].Segment.First > ds.First
	type damaged struct {
		dir string
		sc  *segmentScan
		bad []BadEntry
	}
	var live, archived []damaged
	for i := range ds.Segments {
		sc := &ds.Segments[i]
		var bad []BadEntry
		for _, b := range sc.Bad {
			if b.TornTail {
				continue
			}
			if b.Lost == 0 && b.Length == 0 {
				return rep, fmt.Errorf("%w: cannot salvage %s", ErrCorrupt, b)
			}
			bad = append(bad, b)
		}
		if len(bad) > 0 {
			live = append(live, damaged{dir, sc, bad})
		}
	}
	if m := ds.Manifest; m != nil {
		for _, r := range m.Removed {
			if r.Archive == "" {
				continue
			}
			segs, _ := scanArchiveRange(r.Archive, m, r, false, &archiveCheck{frames: true})
			for _, s := range segs {
				var bad []BadEntry
				for _, b := range s.bad {
					if b.Reason != ReasonUndecodable && (b.Lost > 0 || b.Length > 0) {
						bad = append(bad, b)
					}
				}
				if len(bad) > 0 {
					archived = append(archived, damaged{r.Archive, s.scan, bad})
				}
			}
		}
	}
	if !head && len(live) == 0 && len(archived) == 0 {
		return rep, nil
	}
	if o.BeforeRewrite != nil {
		var lost []LostRange
		if head {
			lost = append(lost, LostRange{ds.First, ds.Segments[0].Segment.First - 1})
		}
		for _, d := range append(slices.Clone(live), archived...) {
			for _, b := range d.bad {
				if b.Lost > 0 {
					lost = append(lost, LostRange{b.Seq, b.Seq + b.Lost - 1})
				}
			}
		}
		if err := o.BeforeRewrite(lost); err != nil {
			return rep, err
		}
	}
	if head {
		if err := salvageHead(dir, ds.First, ds.Segments[0].Segment.First, &rep); err != nil {
			return rep, fmt.Errorf("wal: salvage %s: %w", segmentName(ds.First), err)
		}
	}
	for _, d := range live {
		if err := salvageSegment(d.dir, quarantineDir, d.sc, d.bad, &rep); err != nil {
			return rep, fmt.Errorf("wal: salvage %s: %w", d.sc.Segment.Name, err)
		}
	}
	for _, d := range archived {
		if err := salvageSegment(d.dir, quarantineDir, d.sc, d.bad, &rep); err != nil {
			return rep, fmt.Errorf("wal: salvage archived %s: %w", filepath.Join(d.dir, d.sc.Segment.Name), err)
		}
		rep.Rewritten[len(rep.Rewritten)-1] = filepath.Join(d.dir, d.sc.Segment.Name)
		if a, err := ReadArchiveIdentity(d.dir); err == nil && a != nil {
			if rec := a.segment(d.sc.Segment.Name); rec != nil {
				if b, err := os.ReadFile(filepath.Join(d.dir, d.sc.Segment.Name)); err == nil {
					rec.Size, rec.CRC = int64(len(b)), crc32.Checksum(b, castagnoli)
					if err := writeArchiveIdentity(d.dir, a); err != nil {
						return rep, fmt.Errorf("wal: salvage: %w", err)
					}
				}
			}
		}
	}
	if len(archived) > 0 {
		if arep, err := VerifyArchives(dir, "", true); err == nil {
			for _, p := range arep.Problems {
				if p.Kind == ArchiveDamaged && p.Bad != nil && p.Bad.Reason != ReasonUndecodable {
					return rep, fmt.Errorf("%w: still damaged after salvage: %s", ErrCorrupt, p)
				}
			}
		}
	}
	after, err := scanDir(dir, false, nil)
	if err != nil {
		return rep, fmt.Errorf("wal: salvage: %w", err)
	}
	for _, b := range after.Bad {
		if !b.TornTail {
			return rep, fmt.Errorf("%w: still damaged after salvage: %s", ErrCorrupt, b)
		}
	}
	return rep, nil
}

func salvageSegment(dir, qdir string, sc *segmentScan, bad []BadEntry, rep *SalvageReport) error {
	path := filepath.Join(dir, sc.Segment.Name)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	full := scanSegment(sc.Segment, data, false, true)
	type item struct {
		off  int64
		good *goodEntry
		bad  *BadEntry
	}
	var items []item
	for i := range full.Good {
		items = append(items, item{off: full.Good[i].Off, good: &full.Good[i]})
	}
	for i := range bad {
		items = append(items, item{off: bad[i].Offset, bad: &bad[i]})
	}
	// Torn-tail bytes, if any, are kept verbatim for Open to repair.
	var tail []byte
	for _, b := range sc.Bad {
		if b.TornTail {
			tail = data[b.Offset : b.Offset+b.Length]
		}
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].off != items[j].off {
			return items[i].off < items[j].off
		}
		return items[i].bad != nil && items[j].bad == nil
	})
	neighbour := func(seq uint64) *Neighbour {
		for _, g := range full.Good {
			if g.Seq == seq {
				if ev, err := DecodeEntry(g.Entry, seq); err == nil {
					return &Neighbour{Seq: seq, Type: ev.Type, Stream: ev.Stream, TS: ev.TS}
				}
			}
		}
		var n *Neighbour
		readEvents(dir, "", seq, seq, func(ev *events.Event, err error) bool {
			if err == nil && ev.Seq == seq {
				n = &Neighbour{Seq: seq, Type: ev.Type, Stream: ev.Stream, TS: ev.TS}
			}
			return false
		})
		return n
	}
	var out []byte
	for _, it := range items {
		if it.good != nil {
			out = append(out, data[it.good.Off:it.good.Off+it.good.Len]...)
			continue
		}
		b := it.bad
		var qname string
		if b.Length > 0 {
			qname, err = quarantine(qdir, fmt.Sprintf("%s-at-%d.salvaged", b.Segment, b.Offset), data[b.Offset:b.Offset+b.Length], false)
			if err != nil {
				return err
			}
			rep.Quarantined = append(rep.Quarantined, qname)
		}
		if b.Lost == 0 {
			rep.Dropped = append(rep.Dropped, *b)
			continue
		}
		var prev *Neighbour
		if b.Seq > 1 {
			prev = neighbour(b.Seq - 1)
		}
		if out, err = appendPlaceholders(out, b, qname, prev, neighbour(b.Seq+b.Lost), rep); err != nil {
			return err
		}
	}
	out = append(out, tail...)
	// Atomically: a temporary file beside it (a dot name tidwall/wal and
	// the scanner ignore), fsync, rename, directory fsync.
	if err := home.WriteFileAtomic(path, out); err != nil {
		return err
	}
	rep.Rewritten = append(rep.Rewritten, sc.Segment.Name)
	return nil
}

// appendPlaceholders appends to out, for each sequence b lost, a frame
// holding a wal.salvaged placeholder, and reports them in rep.
func appendPlaceholders(out []byte, b *BadEntry, qname string, prev, next *Neighbour, rep *SalvageReport) ([]byte, error) {
	guess := guessFrom(prev, next)
	for k := uint64(0); k < b.Lost; k++ {
		seq := b.Seq + k
		if rep.fetch != nil {
			e, err := rep.fetch(seq)
			if err != nil {
				return out, fmt.Errorf("seq %d from its copy: %w", seq, err)
			}
			if e != nil {
				if _, reason := checkEntry(e, seq); reason != "" {
					return out, fmt.Errorf("seq %d from its copy: %s", seq, reason)
				}
				out = binary.AppendUvarint(out, uint64(len(e)))
				out = append(out, e...)
				rep.Recovered = append(rep.Recovered, seq)
				continue
			}
		}
		ph := &events.WalSalvaged{LostSeq: seq, Segment: b.Segment, Offset: b.Offset, Length: b.Length, Quarantine: qname, Reason: b.Reason, Guess: guess}
		ev, err := events.New("wal", ph)
		if err != nil {
			return out, err
		}
		ev.Seq = seq
		switch {
		case prev != nil:
			ev.TS = prev.TS
		case next != nil:
			ev.TS = next.TS
		}
		entry, err := EncodeEntry(ev)
		if err != nil {
			return out, err
		}
		out = binary.AppendUvarint(out, uint64(len(entry)))
		out = append(out, entry...)
		rep.Lost = append(rep.Lost, LostEntry{Seq: seq, Segment: b.Segment, Offset: b.Offset, Length: b.Length, Reason: b.Reason, Quarantine: qname, Prev: prev, Next: next, Guess: guess})
	}
	return out, nil
}

// salvageHead writes the first segment anew when the log's first segment
// starts at first, after base (1, or the first retained seq of the
// manifest): a placeholder at each sequence before first (see scanDir).
func salvageHead(dir string, base, first uint64, rep *SalvageReport) error {
	b := BadEntry{Segment: segmentName(base), Offset: 0, Seq: base, Lost: first - base, Reason: ReasonMissing}
	var next *Neighbour
	readEvents(dir, "", first, first, func(ev *events.Event, err error) bool {
		if err == nil && ev.Seq == first {
			next = &Neighbour{Seq: first, Type: ev.Type, Stream: ev.Stream, TS: ev.TS}
		}
		return false
	})
	out, err := appendPlaceholders(nil, &b, "", nil, next, rep)
	if err != nil {
		return err
	}
	if err := home.WriteFileAtomic(filepath.Join(dir, b.Segment), out); err != nil {
		return err
	}
	rep.Rewritten = append(rep.Rewritten, b.Segment)
	return nil
}

func guessFrom(prev, next *Neighbour) string {
	switch {
	case prev != nil && next != nil && prev.Stream == next.Stream:
		return fmt.Sprintf("stream %s, between %s (seq %d) and %s (seq %d)", prev.Stream, prev.Type, prev.Seq, next.Type, next.Seq)
	case prev != nil && next != nil:
		return fmt.Sprintf("after %s on %s (seq %d), before %s on %s (seq %d)", prev.Type, prev.Stream, prev.Seq, next.Type, next.Stream, next.Seq)
	case prev != nil:
		return fmt.Sprintf("after %s on %s (seq %d)", prev.Type, prev.Stream, prev.Seq)
	case next != nil:
		return fmt.Sprintf("before %s on %s (seq %d)", next.Type, next.Stream, next.Seq)
	}
	return ""
}

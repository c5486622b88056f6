package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cmlab/cmlab/home"
)

// The compaction manifest, wal/MANIFEST, is what lets a log start at a
// sequence other than 1: its format and rules are in doc.go
// ("Compaction"). tidwall/wal ignores the name (it is not 20 digits), and
// so does the segment scanner.

// manifestName is the manifest file in the log directory.
const manifestName = "MANIFEST"

const manifestVersion = 1

// ErrCompacted is wrapped by errors about sequences before the first
// retained one that cannot be read: deleted by compaction, or archived to
// a directory that does not hold them (any more). It is not corruption:
// nothing the log acknowledged as retained is missing.
var ErrCompacted = errors.New("wal: compacted")

// Manifest is the content of wal/MANIFEST.
type Manifest struct {
	Version     int            `json:"version"`
	FirstSeq    uint64         `json:"first_seq"`
	Removed     []RemovedRange `json:"removed"`
	CompactedAt int64          `json:"compacted_at"`
	// HomeID is the id of the home whose log this is (state/home-id),
	// recorded by compactions since home ids exist: the archives of its
	// removed ranges must record the same (archive.go).
	HomeID string `json:"home_id,omitempty"`
	Sum    uint32 `json:"sum"`
}

// RemovedRange is a run of sequences compaction removed from the log
// directory.
type RemovedRange struct {
	First    uint64 `json:"first"`
	Last     uint64 `json:"last"`
	Segments int    `json:"segments"`
	Bytes    int64  `json:"bytes"`
	// Archive is the absolute directory the segment files were moved to;
	// empty when they were deleted.
	Archive string `json:"archive,omitempty"`
	At      int64  `json:"at"`
}

// rangeOf returns the removed range holding seq, nil if none.
func (m *Manifest) rangeOf(seq uint64) *RemovedRange {
	if m == nil {
		return nil
	}
	for i := range m.Removed {
		if r := &m.Removed[i]; r.First <= seq && seq <= r.Last {
			return r
		}
	}
	return nil
}

// firstSeq is the first retained sequence a manifest m says (1 without one).
func (m *Manifest) firstSeq() uint64 {
	if m == nil || m.FirstSeq == 0 {
		return 1
	}
	return m.FirstSeq
}

func (m *Manifest) sumField() *uint32 { return &m.Sum }

// ReadManifest returns the manifest of the log in dir, nil (and no
// error) when the log was never compacted. A manifest that cannot be
// read, does not parse, fails its sum or contradicts itself is an error
// wrapping ErrCorrupt: the first retained sequence is then unknown, so
// Open refuses and nothing is removed.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w: %w", manifestName, ErrBadManifest, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w: %s: %v", ErrCorrupt, ErrBadManifest, manifestName, err)
	}
	if m.Version != manifestVersion {
		return nil, fmt.Errorf("%w: %w: %s has version %d, want %d", ErrCorrupt, ErrBadManifest, manifestName, m.Version, manifestVersion)
	}
	if !soundRecord(&m) {
		return nil, fmt.Errorf("%w: %w: %s: sum %d does not match its content", ErrCorrupt, ErrBadManifest, manifestName, m.Sum)
	}
	next := uint64(1)
	for _, r := range m.Removed {
		if r.First != next || r.Last < r.First {
			return nil, fmt.Errorf("%w: %w: %s: removed range %d..%d does not follow %d", ErrCorrupt, ErrBadManifest, manifestName, r.First, r.Last, next-1)
		}
		next = r.Last + 1
	}
	if m.FirstSeq != next {
		return nil, fmt.Errorf("%w: %w: %s: first_seq %d, but the removed ranges end at %d", ErrCorrupt, ErrBadManifest, manifestName, m.FirstSeq, next-1)
	}
	return &m, nil
}

// writeManifest replaces dir/MANIFEST with m durably through fsys
// (writeDurable: temporary file, fsync, rename, directory fsync).
func writeManifest(fsys home.FS, dir string, m *Manifest, noSync bool) error {
	m.Version = manifestVersion
	b, err := encodeRecord(m)
	if err != nil {
		return err
	}
	return writeDurable(fsys, filepath.Join(dir, manifestName), b, noSync, false)
}

// withRemoved returns a copy of m (nil: a log never compacted) whose
// first retained seq is first, with r appended to its removed ranges
// (merged into the last one when they share a fate).
func (m *Manifest) withRemoved(r RemovedRange, first uint64) *Manifest {
	out := &Manifest{FirstSeq: first, CompactedAt: r.At}
	if m != nil {
		out.Removed = append(out.Removed, m.Removed...)
		out.HomeID = m.HomeID
	}
	if n := len(out.Removed); n > 0 && out.Removed[n-1].Archive == r.Archive && out.Removed[n-1].Last+1 == r.First {
		p := &out.Removed[n-1]
		p.Last, p.Segments, p.Bytes, p.At = r.Last, p.Segments+r.Segments, p.Bytes+r.Bytes, r.At
	} else {
		out.Removed = append(out.Removed, r)
	}
	return out
}

// CompactedError is the error for sequences before the first retained one
// that cannot be read. It wraps ErrCompacted and says how to get them back.
type CompactedError struct {
	Seq      uint64 // the sequence asked for
	FirstSeq uint64 // the first retained sequence
	Range    RemovedRange
	// Missing, when set, is the archived segment file that is not where
	// the manifest (or the archive directory given) says.
	Missing string
	// Archive is the directory that was looked in ("" for a deleted range).
	Archive string
	Cause   error
}

func (e *CompactedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: seq %d is before the first retained seq %d: seqs %d..%d were ", ErrCompacted, e.Seq, e.FirstSeq, e.Range.First, e.Range.Last)
	if e.Range.Archive == "" {
		b.WriteString("deleted by compaction; only a backup of the log directory can bring them back")
		return b.String()
	}
	fmt.Fprintf(&b, "archived to %s", e.Range.Archive)
	if e.Missing != "" {
		fmt.Fprintf(&b, ", but %s lacks %s", e.Archive, e.Missing)
	}
	if e.Cause != nil {
		fmt.Fprintf(&b, " (%v)", e.Cause)
	}
	fmt.Fprintf(&b, "; fix: restore the archive: put its segment files back in %s (or pass --archive DIR where they are now)", e.Range.Archive)
	return b.String()
}

func (e *CompactedError) Unwrap() error { return ErrCompacted }

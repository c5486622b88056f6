package wal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cmlab/cmlab/home"
)

// The archive of a compacted log: the directory removed segments are
// moved to. Compaction may only move history, never lose it, so:
//
//   - the archive directory is never the log directory, inside it, or the
//     home (the log directory's parent): compared by real path (symlinks
//     resolved, on the archive given and on the log directory) and by
//     device and inode of every existing directory on the way, so that a
//     symlink or a bind mount to wal/ is refused like wal/ itself
//     (checkArchive). An archived copy that is the segment file itself is
//     refused too (archiveSegment), whatever path led there;
//   - an archived copy is read back after its fsync and checked before
//     any segment is removed: its size, and every frame's CRC and seq
//     (verifyArchivedCopy);
//   - the archive records whose it is and what it holds: ARCHIVE, JSON
//     replaced atomically, written after the copies and before the
//     manifest:
//
//	{"version":1,
//	 "home_id":"0193…",              state/home-id of the home whose log this is
//	 "segments":[{"name":"00000000000000000001","first":1,"last":44,"size":1020},…],
//	 "sum":123456}                   CRC-32C of the same JSON with sum 0
//
//     An archive recording another home id is refused by compaction and by
//     every reader (ErrForeignArchive); the manifest records the home id
//     too (Manifest.HomeID), so a reader knows which one to expect. Homes
//     compacted before home ids existed have neither: their archives are
//     accepted as before, and the next compaction or `cmlab compact
//     --repair-manifest` records both.

// archiveIdentityName is the identity file of an archive directory.
const archiveIdentityName = "ARCHIVE"

const archiveIdentityVersion = 1

// ErrForeignArchive is wrapped by errors about an archive directory that
// belongs to another home, or does not say whose it is when the log
// expects it to.
var ErrForeignArchive = errors.New("wal: archive of another home")

// ArchiveIdentity is the content of an archive directory's ARCHIVE file.
type ArchiveIdentity struct {
	Version  int               `json:"version"`
	HomeID   string            `json:"home_id"`
	Segments []ArchivedSegment `json:"segments"`
	Sum      uint32            `json:"sum"`
}

// ArchivedSegment is one segment file an archive holds, checked frame by
// frame when it was archived.
type ArchivedSegment struct {
	Name  string `json:"name"`
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	Size  int64  `json:"size"`
	// CRC is the CRC-32C of the whole file as archived (0: not recorded,
	// an archive made before it was): a copy whose bytes differ, however
	// sound its frames (another home's segment of the same seqs), is not
	// this one.
	CRC uint32 `json:"crc,omitempty"`
}

func (a *ArchiveIdentity) sumField() *uint32 { return &a.Sum }

// segment returns the record of the segment named name, nil if none.
func (a *ArchiveIdentity) segment(name string) *ArchivedSegment {
	if a == nil {
		return nil
	}
	for i := range a.Segments {
		if a.Segments[i].Name == name {
			return &a.Segments[i]
		}
	}
	return nil
}

// ReadArchiveIdentity returns the ARCHIVE record of the archive directory
// dir: nil and no error when it has none (an archive made before home
// ids, or not an archive); an error wrapping ErrCorrupt when it does not
// parse or fails its sum.
func ReadArchiveIdentity(dir string) (*ArchiveIdentity, error) {
	b, err := os.ReadFile(filepath.Join(dir, archiveIdentityName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w", filepath.Join(dir, archiveIdentityName), err)
	}
	var a ArchiveIdentity
	if err := json.Unmarshal(b, &a); err != nil || a.Version != archiveIdentityVersion || !soundRecord(&a) {
		return nil, fmt.Errorf("%w: %s does not parse or fails its sum (fix: cmlab compact --repair-manifest --archive %s rewrites it from the segments there)", ErrCorrupt, filepath.Join(dir, archiveIdentityName), home.ShellQuote(dir))
	}
	return &a, nil
}

// writeArchiveIdentity replaces dir/ARCHIVE with a (atomically, fsynced).
func writeArchiveIdentity(dir string, a *ArchiveIdentity) error {
	a.Version = archiveIdentityVersion
	slices.SortFunc(a.Segments, func(x, y ArchivedSegment) int {
		switch {
		case x.First < y.First:
			return -1
		case x.First > y.First:
			return 1
		}
		return 0
	})
	a.Segments = slices.CompactFunc(a.Segments, func(x, y ArchivedSegment) bool { return x.Name == y.Name })
	b, err := encodeRecord(a)
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(filepath.Join(dir, archiveIdentityName), b)
}

// checkArchiveOwner refuses the archive directory dir when its ARCHIVE
// names a home other than homeID. want "" (a log whose manifest records no
// home id) accepts any archive. An archive without ARCHIVE is refused only
// when requireID is set (a reader told to expect this home's archive).
func checkArchiveOwner(dir, homeID string, requireID bool) (*ArchiveIdentity, error) {
	a, err := ReadArchiveIdentity(dir)
	if err != nil {
		return nil, err
	}
	switch {
	case homeID == "":
		return a, nil
	case a == nil && requireID:
		return nil, fmt.Errorf("%w: %s does not say whose archive it is (no %s file), and this log's wal/MANIFEST expects home %s; if it is this home's archive, record it with 'cmlab compact --repair-manifest --archive %s'", ErrForeignArchive, dir, archiveIdentityName, homeID, home.ShellQuote(dir))
	case a != nil && a.HomeID != "" && a.HomeID != homeID:
		return nil, fmt.Errorf("%w: %s is the archive of home %s, not of this home (%s): pass --archive with this home's own archive", ErrForeignArchive, dir, a.HomeID, homeID)
	}
	return a, nil
}

// realPath resolves every symlink of p's longest existing prefix and
// appends the rest: where p is, or would be once created.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether path p is dir or lies inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// checkArchive returns the absolute archive directory, refusing the log
// directory, anything inside it, and the home (the log directory's
// parent): by real path and by device and inode (see the top of this
// file).
func checkArchive(dir, archive string) (string, error) {
	abs, err := filepath.Abs(archive)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadArchive, err)
	}
	realA, err := realPath(archive)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrBadArchive, archive, err)
	}
	realLog, err := realPath(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrBadArchive, dir, err)
	}
	realHome := filepath.Dir(realLog)
	bad := func(what string) (string, error) {
		return "", fmt.Errorf("%w: %s is %s (it resolves to %s): archiving there would delete the segments it copies; pass a directory outside the log", ErrBadArchive, archive, what, realA)
	}
	switch {
	case within(realA, realLog):
		return bad("the log directory or inside it")
	case realA == realHome:
		return bad("the home directory")
	}
	logFI, logErr := os.Stat(dir)
	homeFI, homeErr := os.Stat(filepath.Dir(realLog))
	// Every existing directory from the archive up: a bind mount of wal/
	// (or of the home) has another path but the same device and inode.
	for cur, first := realA, true; ; first = false {
		if fi, err := os.Stat(cur); err == nil {
			if logErr == nil && os.SameFile(fi, logFI) {
				return bad("the log directory or inside it")
			}
			if first && homeErr == nil && os.SameFile(fi, homeFI) {
				return bad("the home directory")
			}
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		cur = parent
	}
	return abs, nil
}

// CheckArchiveDir reports whether archive may receive the segments the
// log in dir compaction removes (cmlab serve checks --compact-archive at
// start with it): an error wrapping ErrBadArchive when it is the log
// directory, inside it, or the home, however named.
func CheckArchiveDir(dir, archive string) error {
	_, err := checkArchive(dir, archive)
	return err
}

// verifyArchivedCopy reads back the archived copy path of segment seg
// (after its fsync) and checks it against src, the segment's bytes in the
// log: the same size, and every frame sound (CRC, version, stored seq) with
// the same number of entries. It returns the copy's record for ARCHIVE.
func verifyArchivedCopy(path string, seg segmentFile, src []byte) (ArchivedSegment, error) {
	got, err := os.ReadFile(path)
	if err != nil {
		return ArchivedSegment{}, fmt.Errorf("read back the archived copy: %w", err)
	}
	if len(got) != len(src) {
		return ArchivedSegment{}, fmt.Errorf("%w: the archived copy %s holds %d bytes, the segment %d", ErrBadArchive, path, len(got), len(src))
	}
	want := scanSegment(seg, src, false, false)
	sc := scanSegment(seg, got, false, false)
	if len(sc.Bad) > 0 {
		return ArchivedSegment{}, fmt.Errorf("%w: the archived copy %s read back damaged: %s", ErrBadArchive, path, sc.Bad[0])
	}
	if len(want.Bad) > 0 {
		return ArchivedSegment{}, fmt.Errorf("%w: segment %s is damaged (%s): run 'cmlab wal verify'", ErrCorrupt, seg.Name, want.Bad[0])
	}
	if sc.Count != want.Count || !bytes.Equal(got, src) {
		return ArchivedSegment{}, fmt.Errorf("%w: the archived copy %s differs from the segment", ErrBadArchive, path)
	}
	return ArchivedSegment{Name: seg.Name, First: seg.First, Last: sc.Next - 1, Size: int64(len(got)), CRC: crc32.Checksum(got, castagnoli)}, nil
}

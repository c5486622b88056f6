package steps

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// World hashing.
//
// A step's world is a list of paths. Its hash is
//
//	"sha256-" + hex(SHA-256(listing))
//
// over a canonical listing with one line per entry, sorted by name:
//
//	<name as a Go-quoted string> SP <kind> SP <size> SP <digest> LF
//
// name is the world path as written (cleaned, forward slashes), and for the
// entries below a listed directory that path + "/" + the relative path.
// kind is file, dir, symlink, missing or other. size is the byte size of a
// file or of a symlink's target text, else 0. digest is "sha256-"+hex of a
// file's content or of a symlink's target text, else "-". Symlinks are
// listed, never followed (so nothing outside the listed roots is read); a
// missing path is listed as missing. The hash of the empty listing is the
// SHA-256 of no bytes.

// Kinds of listing entries.
const (
	KindFile    = "file"
	KindDir     = "dir"
	KindSymlink = "symlink"
	KindMissing = "missing"
	KindOther   = "other"
)

// WorldEntry is one line of a world listing.
type WorldEntry struct {
	Name   string
	Kind   string
	Size   int64
	Digest string
}

// HashBytes is "sha256-" + hex of b.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256-" + hex.EncodeToString(sum[:])
}

// HashListing hashes entries (in any order; duplicates by name are listed once).
func HashListing(entries []WorldEntry) string {
	es := append([]WorldEntry(nil), entries...)
	sort.SliceStable(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	var b strings.Builder
	for i, e := range es {
		if i > 0 && es[i-1].Name == e.Name {
			continue
		}
		b.WriteString(strconv.Quote(e.Name))
		b.WriteByte(' ')
		b.WriteString(e.Kind)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(e.Size, 10))
		b.WriteByte(' ')
		b.WriteString(e.Digest)
		b.WriteByte('\n')
	}
	return HashBytes([]byte(b.String()))
}

// worldName is the listing name of a world path as written.
func worldName(p string) string { return filepath.ToSlash(filepath.Clean(p)) }

// resolve returns p made absolute against dir.
func resolve(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// ListWorld lists the world paths (relative ones resolved against dir).
func ListWorld(dir string, paths []string) ([]WorldEntry, error) {
	var out []WorldEntry
	for _, p := range paths {
		name := worldName(p)
		abs := resolve(dir, p)
		fi, err := os.Lstat(abs)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) /* below a regular file */ {
			out = append(out, WorldEntry{Name: name, Kind: KindMissing, Digest: "-"})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("recovery: world %s: %w", name, err)
		}
		if !fi.IsDir() {
			e, err := entryOf(abs, name, fi)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
			continue
		}
		out = append(out, WorldEntry{Name: name, Kind: KindDir, Digest: "-"})
		err = filepath.WalkDir(abs, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if q == abs {
				return nil
			}
			rel, err := filepath.Rel(abs, q)
			if err != nil {
				return err
			}
			n := name + "/" + filepath.ToSlash(rel)
			if d.IsDir() {
				out = append(out, WorldEntry{Name: n, Kind: KindDir, Digest: "-"})
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			e, err := entryOf(q, n, info)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("recovery: world %s: %w", name, err)
		}
	}
	return out, nil
}

func entryOf(abs, name string, fi fs.FileInfo) (WorldEntry, error) {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(abs)
		if err != nil {
			return WorldEntry{}, fmt.Errorf("recovery: world %s: %w", name, err)
		}
		return WorldEntry{Name: name, Kind: KindSymlink, Size: int64(len(t)), Digest: HashBytes([]byte(t))}, nil
	case fi.Mode().IsRegular():
		f, err := os.Open(abs)
		if err != nil {
			return WorldEntry{}, fmt.Errorf("recovery: world %s: %w", name, err)
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return WorldEntry{}, fmt.Errorf("recovery: world %s: %w", name, err)
		}
		return WorldEntry{Name: name, Kind: KindFile, Size: n, Digest: "sha256-" + hex.EncodeToString(h.Sum(nil))}, nil
	default:
		return WorldEntry{Name: name, Kind: KindOther, Digest: "-"}, nil
	}
}

// WorldHash is the hash of the canonical listing of paths (relative ones
// resolved against dir).
func WorldHash(dir string, paths []string) (string, error) {
	es, err := ListWorld(dir, paths)
	if err != nil {
		return "", err
	}
	return HashListing(es), nil
}

// CurrentWorldHash is the world hash of a planned step now, "" when the
// step declares no world (its state cannot be observed).
func (s *StepState) CurrentWorldHash() (string, error) {
	if len(s.World) == 0 {
		return "", nil
	}
	return WorldHash(s.Dir, s.World)
}

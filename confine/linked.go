package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A run folder may name its final render through a symlink (video.mp4 ->
// renders/final.mp4, issue 28 A2). OpenLinked follows such a link only to
// a file beneath the folder itself or beneath one of the allowed bases,
// with the guarantees of Open: the link is resolved, the resolved path is
// opened beneath the base that holds it with no symlink allowed on the
// way (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and the opened
// descriptor must be the file that was resolved (same device and inode);
// a link swapped meanwhile fails, it never opens something else.

// ErrLinkOutside is wrapped when a symlink points outside the folder and
// every allowed base.
var ErrLinkOutside = errors.New("confine: symlink points outside the run folder and the allowed roots")

// OpenLinked is Open, except that name (a single file name directly
// beneath root) may be a symlink whose target resolves beneath root or
// beneath one of bases.
func OpenLinked(root, name string, bases []string) (*os.File, error) {
	return openLinked(root, name, bases, nil)
}

// OpenLinkedFor is OpenLinked for the caller u (as OpenFor: the caller
// must be able to reach and read the file the link resolves to).
func OpenLinkedFor(root, name string, bases []string, u User) (*os.File, error) {
	return openLinked(root, name, bases, &u)
}

// ReadFileLinked is ReadFile through OpenLinked (or OpenLinkedFor when u
// is not nil).
func ReadFileLinked(root, name string, bases []string, max int64, u *User) ([]byte, error) {
	f, err := openLinked(root, name, bases, u)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, name, max)
}

// StatLinked is the fstat of name opened as OpenLinked does.
func StatLinked(root, name string, bases []string) (os.FileInfo, error) {
	return statOpened(OpenLinked(root, name, bases))
}

// openAs is OpenFor for the caller u, or Open when u is nil.
func openAs(root, name string, u *User) (*os.File, error) {
	if u != nil {
		return OpenFor(root, name, *u)
	}
	return Open(root, name)
}

func openLinked(root, name string, bases []string, u *User) (*os.File, error) {
	f, err := openAs(root, name, u)
	if !errors.Is(err, ErrSymlink) || strings.ContainsRune(name, filepath.Separator) {
		return f, err
	}
	link := filepath.Join(root, name)
	var lst unix.Stat_t
	if err := unix.Lstat(link, &lst); err != nil || lst.Mode&unix.S_IFMT != unix.S_IFLNK {
		// Not (or no longer) a symlink itself: a directory above it is one.
		return nil, fmt.Errorf("%w: %s", ErrSymlink, link)
	}
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		return nil, pathError("resolve", link, err)
	}
	var want unix.Stat_t
	if err := unix.Stat(target, &want); err != nil {
		return nil, pathError("stat", target, err)
	}
	for _, b := range append([]string{root}, bases...) {
		base, err := filepath.EvalSymlinks(b)
		if err != nil || !filepath.IsAbs(base) {
			continue
		}
		rel, err := filepath.Rel(base, target)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
			continue
		}
		if f, err = openAs(base, rel, u); err != nil {
			return nil, err
		}
		var got unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &got); err != nil {
			f.Close()
			return nil, pathError("fstat", target, err)
		}
		if got.Dev != want.Dev || got.Ino != want.Ino {
			f.Close()
			return nil, fmt.Errorf("%w: %s changed while it was opened", ErrSymlink, link)
		}
		return f, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrLinkOutside, name)
}

package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A daemon that serves files to local callers reads them with its own
// rights, which may be far more than a caller's (issue 27 finding 5: any
// user read the owner's 0600 video through the Lab). OpenFor serves a
// caller only what the caller could read itself: the opened descriptor's
// fstat (no second lookup an attacker could race) must grant the caller
// read, and every directory from / down to the file must grant it search.

// ErrAccess is wrapped when the caller could not read the file itself.
var ErrAccess = errors.New("confine: the caller may not read this file itself")

// User is who a file is opened for: a uid and its groups. Root reads
// everything; a negative UID (a caller whose uid is not known) is
// "others" of every file: it reads only what every user may.
type User struct {
	UID  int
	GIDs []int
}

// Nobody is a caller whose uid is not known.
var Nobody = User{UID: -1}

// may reports whether u holds perm (4 read, 1 search) on a file of st's
// owner, group and mode, as the kernel decides it: the owner's bits for
// the owner, else the group's for a member, else the others'.
func (u User) may(st *unix.Stat_t, perm uint32) bool {
	switch {
	case u.UID == 0:
		return true // CAP_DAC_OVERRIDE (files and directories alike, for read and search)
	case u.UID >= 0 && int(st.Uid) == u.UID:
		return st.Mode&(perm<<6) != 0
	case u.UID >= 0 && slices.Contains(u.GIDs, int(st.Gid)):
		return st.Mode&(perm<<3) != 0
	}
	return st.Mode&perm != 0
}

// OpenFor is Open for the caller u: the file must be one u could read
// itself (ErrAccess wrapped otherwise).
func OpenFor(root, name string, u User) (*os.File, error) {
	if err := SearchableBy(filepath.Dir(filepath.Join(root, name)), u); err != nil {
		return nil, err
	}
	f, err := Open(root, name)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, pathError("fstat", f.Name(), err)
	}
	if !u.may(&st, 4) {
		f.Close()
		return nil, fmt.Errorf("%w: %s (owner uid %d, mode %04o; caller %s)", ErrAccess, filepath.Join(root, name), st.Uid, st.Mode&0o7777, u)
	}
	return f, nil
}

// ReadFileFor is ReadFile for the caller u (OpenFor).
func ReadFileFor(root, name string, max int64, u User) ([]byte, error) {
	f, err := OpenFor(root, name, u)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, name, max)
}

// SearchableBy checks that u may search dir (absolute) and every
// directory above it: that u could reach a name inside it.
func SearchableBy(dir string, u User) error {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%w: %q is not absolute", ErrOutside, dir)
	}
	p := "/"
	for _, c := range append([]string{""}, strings.Split(strings.TrimPrefix(dir, "/"), "/")...) {
		if c != "" {
			p = filepath.Join(p, c)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return pathError("stat", p, err)
		}
		if !u.may(&st, 1) {
			return fmt.Errorf("%w: %s (owner uid %d, mode %04o; caller %s cannot enter it)", ErrAccess, p, st.Uid, st.Mode&0o7777, u)
		}
	}
	return nil
}

func (u User) String() string {
	if u.UID < 0 {
		return "of unknown uid, as any user"
	}
	return fmt.Sprintf("uid %d", u.UID)
}

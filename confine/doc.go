// Package confine opens files that another user may be able to change
// while cmlab reads them: a run's artifacts, reports and video, which live
// in directories outside the home (the allowed import roots).
//
// Checking a path and then opening it again is a race an attacker wins: a
// file swapped for a symlink between the check and the open is followed
// (issue 15 found /etc/shadow served as a run's video). So a file is
// opened once and the opened file is checked:
//
//   - the root directory (a real path recorded at import) is opened
//     following no symlink on the way;
//   - the name is opened relative to that descriptor with openat2(2)
//     RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, or, where
//     openat2 is unavailable (ENOSYS, or refused by a seccomp filter), by
//     one openat(2) with O_NOFOLLOW per path component;
//   - the open uses O_NONBLOCK, so a FIFO or a device does not block the
//     calling thread; fstat(2) of the descriptor must then say "regular
//     file" (else ErrNotRegular), and only then is O_NONBLOCK cleared.
//
// What is read or served is that descriptor, never the path again. A name
// must be relative and clean ("a/b.json", never "../x" or "/x").
package confine

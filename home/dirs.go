package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// A home's directories are real directories. The home itself may be
// reached through a symlink (~/.cm linked to a larger disk is fine), but
// below it cmlab writes only inside the home: a view rebuilt, a segment
// repaired, a state file replaced through a directory that is a link
// would write into the link's target — the damage matrix's "symlink
// elsewhere" on a directory rebuilt feedback/feedback.jsonl over the
// target's file of that name. So Ensure, which everything that writes to
// a home passes first, refuses a home with a directory below it that is a
// symlink (or anything else but a directory), naming it and its fix, and
// touches neither the link nor its target.

// homeDirs are the directories of a home, relative to it: the fixed ones,
// then the patterns of the ones made per session and conversation.
var homeDirs = []string{"wal", "state", "state/snapshots", "state/resume", "state/step-output", "quarantine",
	"feedback", "lab", "lab/sessions", "lab/exports", "steps", "pty",
	"lab/sessions/*", "pty/*", "pty/*/blocks", "state/step-output/*"}

// derivedDirs hold only what the log rebuilds (views, spools, block
// files): removing such a link and running `cmlab rebuild` is a fix.
var derivedDirs = map[string]bool{"feedback": true, "steps": true, "pty": true, "pty/*": true, "pty/*/blocks": true,
	"lab/sessions": true, "lab/sessions/*": true}

// ErrLinkedDir is returned (wrapped) for a home directory that is a
// symlink or not a directory.
var ErrLinkedDir = errors.New("a directory of the home is not a real directory")

// CheckDirs returns an error wrapping ErrLinkedDir for the first directory
// of the home that exists and is not a real directory. A missing one is
// fine (Ensure creates it).
func (h Home) CheckDirs() error {
	for _, pat := range homeDirs {
		matches := []string{pat}
		if hasMeta(pat) {
			matches, _ = filepath.Glob(filepath.Join(h.Dir, filepath.FromSlash(pat)))
			for i, m := range matches {
				matches[i] = h.Rel(m)
			}
		}
		for _, rel := range matches {
			if err := h.checkDir(pat, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckPath is CheckDirs for the directories from the home down to rel
// (relative to the home, forward slashes) only: for a writer that needs
// one path below the home (the daemon log before Ensure; 'cmlab run's step
// output, written whether a daemon runs or not) without reading every
// session's and conversation's directory.
func (h Home) CheckPath(rel string) error {
	for i := 0; i <= len(rel); i++ {
		if i == len(rel) || rel[i] == '/' {
			if err := h.checkDir(rel[:i], rel[:i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h Home) checkDir(pat, rel string) error {
	p := filepath.Join(h.Dir, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return nil
	}
	if hasMeta(pat) && fi.Mode().IsRegular() && path.Base(pat) == "*" {
		return nil // a stray file among the session or conversation directories is not followed
	}
	what := "a " + fi.Mode().Type().String()
	place := "put the directory itself in its place"
	if fi.Mode()&fs.ModeSymlink != 0 {
		to, _ := os.Readlink(p)
		what = fmt.Sprintf("a symbolic link (to %s)", to)
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(p), to) // relative to the link's directory, not the home
		}
		place = fmt.Sprintf("put the directory itself in its place, from the home: rm %s && cp -a %s %s", rel, ShellQuote(to), rel)
	}
	fix := "fix: " + place + "; to keep the home elsewhere, link or mount the whole home instead"
	if derivedDirs[pat] {
		fix += fmt.Sprintf("; or remove %s and run `cmlab rebuild` to rebuild it from the log", rel)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is %s: cmlab writes a home's files only inside the home, never through a link\n%s", ErrLinkedDir, rel, what, fix)
	}
	return fmt.Errorf("%w: %s is %s, not a directory\n%s", ErrLinkedDir, rel, what, fix)
}

func hasMeta(pat string) bool {
	for i := 0; i < len(pat); i++ {
		switch pat[i] {
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// ErrIsDir is returned (wrapped) by DropNonRegular for a directory.
var ErrIsDir = errors.New("a directory where a file belongs")

// DropNonRegular removes path when it exists and is not a regular file —
// a symlink (the link itself, never its target), a FIFO, a device — so
// that nothing is written outside the home through it. A directory is
// refused (ErrIsDir): it is not ours to remove. what names the file in
// errors ("a view"). It reports whether it removed something.
func DropNonRegular(path, what string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case fi.Mode().IsRegular():
		return false, nil
	case fi.IsDir():
		return false, fmt.Errorf("%s: %w", path, ErrIsDir)
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("remove %s (a %s where %s belongs): %w", path, fi.Mode().Type(), what, err)
	}
	return true, nil
}

// OpenOwn opens path, one of the home's own files that cmlab alone writes
// (the daemon log, a step's output, a resumed mandate's log), with flag
// (O_CREATE and the like) and O_NOFOLLOW, after DropNonRegular; O_NOFOLLOW
// fails a link planted after that check. A directory at path fails the
// open.
func OpenOwn(path string, flag int, perm fs.FileMode) (*os.File, error) {
	if _, err := DropNonRegular(path, "cmlab's own file"); err != nil && !errors.Is(err, ErrIsDir) {
		return nil, err
	}
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
}

// ShellQuote quotes s for a POSIX shell, for fixes printed as commands an
// operator may paste: as it is when every byte is one a shell takes
// literally in a word (letters, digits and @%+=:,./_-), else in single
// quotes, so nothing in s ($, `, \, spaces, a leading ~ or -) is expanded
// or split.
func ShellQuote(s string) string {
	if s != "" && !strings.HasPrefix(s, "-") && strings.Trim(s, shellPlain) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellPlain are the bytes a POSIX shell takes literally in a word.
const shellPlain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-"

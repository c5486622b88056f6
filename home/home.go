package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Permissions of everything cmlab creates in a home.
const (
	DirPerm  os.FileMode = 0o700
	FilePerm os.FileMode = 0o600
)

// ErrInvalidID is returned for an id that cannot be used as a path component.
var ErrInvalidID = errors.New("invalid id")

// idRE is compiled at its first use, not at init: a bounded repetition
// compiles to a large program, and init runs at every start of the CLI.
var idRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`) })

// ValidateID checks that id may be used as one path component:
// [A-Za-z0-9_.-]{1,128}, and not "." or "..".
func ValidateID(id string) error {
	if !idRE().MatchString(id) || id == "." || id == ".." {
		return fmt.Errorf("%w %q: want 1–128 characters of [A-Za-z0-9_.-], not . or ..", ErrInvalidID, id)
	}
	return nil
}

// Home is the root directory of one cmlab installation.
type Home struct{ Dir string }

// Resolve picks the home: flag if set, else $CMLAB_HOME, else ~/.cm.
// The result is absolute.
func Resolve(flag string) (Home, error) {
	dir := flag
	if dir == "" {
		dir = os.Getenv("CMLAB_HOME")
	}
	if dir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return Home{}, fmt.Errorf("no --home, no $CMLAB_HOME and no user home: %w", err)
		}
		dir = filepath.Join(h, ".cm")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Home{}, err
	}
	return Home{Dir: abs}, nil
}

func (h Home) path(parts ...string) string {
	return filepath.Join(append([]string{h.Dir}, parts...)...)
}

func (h Home) WALDir() string         { return h.path("wal") }
func (h Home) StateDir() string       { return h.path("state") }
func (h Home) CheckpointFile() string { return h.path("state", "checkpoint.json") }
func (h Home) DaemonFile() string     { return h.path("state", "daemon.json") }
func (h Home) TokenFile() string      { return h.path("state", "token") }

// RequestIndexFile is the on-disk request-id index (package reqindex).
func (h Home) RequestIndexFile() string { return h.path("state", "reqindex.db") }
func (h Home) QuarantineDir() string    { return h.path("quarantine") }
func (h Home) FeedbackFile() string     { return h.path("feedback", "feedback.jsonl") }
func (h Home) RunsFile() string         { return h.path("lab", "runs.jsonl") }
func (h Home) ExperimentsFile() string {
	return h.path("lab", "experiments.jsonl")
}
func (h Home) ExportsDir() string { return h.path("lab", "exports") }
func (h Home) StepsFile() string  { return h.path("steps", "steps.jsonl") }

// SessionDir is lab/sessions/<sessionId>; the id must be valid.
func (h Home) SessionDir(sessionID string) (string, error) {
	if err := ValidateID(sessionID); err != nil {
		return "", err
	}
	return h.path("lab", "sessions", sessionID), nil
}

// PtyDir is pty/<conversationId>; the id must be valid.
func (h Home) PtyDir(conversationID string) (string, error) {
	if err := ValidateID(conversationID); err != nil {
		return "", err
	}
	return h.path("pty", conversationID), nil
}

// Rel returns p relative to the home, with forward slashes, for names that
// go into files and messages (never a machine path).
func (h Home) Rel(p string) string {
	r, err := filepath.Rel(h.Dir, p)
	if err != nil || strings.HasPrefix(r, "..") {
		return p
	}
	return filepath.ToSlash(r)
}

// Ensure creates the home's directories (0700) if they are missing, and
// makes their entries durable (MkdirAllSync). Everything that writes to a
// home comes through here first (engine.Open, recover --salvage), so it
// also refuses a home owned by another user (CheckOwner): root running a
// command in a user's home would leave files that user cannot open; and a
// home with a directory below it that is a symlink (CheckDirs).
func (h Home) Ensure() error {
	if err := h.CheckOwner(); err != nil {
		return err
	}
	if err := h.CheckDirs(); err != nil {
		return err
	}
	for _, d := range []string{h.Dir, h.WALDir(), h.StateDir(), h.QuarantineDir(),
		h.path("feedback"), h.path("lab"), h.path("lab", "sessions"), h.ExportsDir(),
		h.path("pty"), h.path("steps")} {
		if err := MkdirAllSync(d); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// MkdirAllSync is os.MkdirAll (0700) that also makes the directories it
// creates durable: a new directory's name lives in its parent, so each
// such parent is fsynced. Without that a power cut could take a new log
// directory away with the fsynced segments inside it. It does nothing to
// a directory that exists.
func MkdirAllSync(dir string) error { return mkdirAllSync(dir, SyncDir) }

func mkdirAllSync(dir string, syncDir func(string) error) error {
	dir = filepath.Clean(dir)
	var created []string // missing before, deepest first
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("mkdir %s: %s is not a directory", dir, d)
			}
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, DirPerm); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("fsync %s: %w", filepath.Dir(created[i]), err)
		}
	}
	return nil
}

// WriteFileAtomic replaces path with data: write a temporary file beside
// it, fsync it, rename it over path, fsync the directory.
func WriteFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), DirPerm); err != nil {
		return err
	}
	return WriteDurable(path, WriteOptions{}, Bytes(data))
}

// SyncDir fsyncs a directory so that entries created or renamed in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

package home

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
)

// The operator token (SPEC §6, "Auth, two secrets") is the one secret that
// opens the terminal, the steps, recovery, the full event stream, /metrics
// and /mcp. It lives only in state/token: 64 hex characters (32 random
// bytes) and a newline, mode 0600, in a home of mode 0700, both owned by
// the user the daemon runs as. It is never served over HTTP; whoever can
// read the file can drive a shell as the daemon's user, so the daemon
// refuses to start when anyone else could read or replace it.

var (
	// ErrNotPrivate is wrapped when the home or state/token can be read or
	// written by another user (group/other permission bits, another owner,
	// a token that is not a regular file).
	ErrNotPrivate = errors.New("not private to its owner")
	// ErrWeakToken is wrapped when state/token holds less than
	// MinTokenBits of entropy, or characters a header cannot carry.
	ErrWeakToken = errors.New("operator token too weak")
	// ErrForeignHome is wrapped when the home belongs to another user than
	// the one running cmlab (root writing into a user's home).
	ErrForeignHome = errors.New("home belongs to another user")
)

// MinTokenBits is the least entropy an operator token may carry (32 bytes).
const MinTokenBits = 256

// OperatorToken returns the operator token of the home, creating
// state/token (32 random bytes in hex, 0600) when it does not exist yet.
// Before reading it checks that the home and the token are private to the
// current user (CheckPrivate), and it refuses a token weaker than
// MinTokenBits (ValidateToken). Errors name the path and the fix.
func (h Home) OperatorToken() (string, error) {
	if err := h.checkDirPrivate(h.Dir); err != nil {
		return "", err
	}
	if err := h.checkDirPrivate(h.StateDir()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b, err := os.ReadFile(h.TokenFile())
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := MkdirAllSync(h.StateDir()); err != nil {
			return "", err
		}
		var raw [MinTokenBits / 8]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return "", err
		}
		tok := hex.EncodeToString(raw[:])
		if err := WriteFileAtomic(h.TokenFile(), []byte(tok+"\n")); err != nil {
			return "", err
		}
		return tok, h.checkFilePrivate(h.TokenFile())
	case err != nil:
		return "", err
	}
	if err := h.checkFilePrivate(h.TokenFile()); err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if err := ValidateToken(tok); err != nil {
		return "", fmt.Errorf("%s: %w; fix: remove it (rm %s) and start cmlab again, which writes a new one", h.TokenFile(), err, ShellQuote(h.TokenFile()))
	}
	return tok, nil
}

// CheckPrivate checks that the home directory, state/ and state/token
// (those that exist) are owned by the current user and carry no group or
// other permission bits. The error wraps ErrNotPrivate and names the path
// and the chmod or chown that fixes it.
func (h Home) CheckPrivate() error {
	if err := h.checkDirPrivate(h.Dir); err != nil {
		return err
	}
	if err := h.checkDirPrivate(h.StateDir()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := h.checkFilePrivate(h.TokenFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (h Home) checkDirPrivate(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: %w", dir, ErrNotPrivate)
	}
	if err := checkOwner(dir, fi, "chown -R"); err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: %w (group and others must have no access); fix: chmod 700 %s", dir, perm, ErrNotPrivate, ShellQuote(dir))
	}
	return nil
}

func (h Home) checkFilePrivate(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a regular file: %w; fix: remove it (rm %s) and start cmlab again, which writes a new token", path, fi.Mode().Type(), ErrNotPrivate, ShellQuote(path))
	}
	if err := checkOwner(path, fi, "chown"); err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: %w (group and others must have no access); fix: chmod 600 %s, and treat the token as leaked: remove it and restart the daemon to get a new one", path, perm, ErrNotPrivate, ShellQuote(path))
	}
	return nil
}

func checkOwner(path string, fi os.FileInfo, chown string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by uid %d running cmlab: %w; fix: run cmlab as uid %d, or %s %d %s", path, st.Uid, uid, ErrNotPrivate, st.Uid, chown, uid, ShellQuote(path))
	}
	return nil
}

// CheckOwner refuses a home owned by another user than the current one:
// files root creates in a user's home would be root's, and the owner's
// daemon could no longer open them. The error wraps ErrForeignHome and
// names the fix. A home that does not exist yet is fine (it will be ours).
func (h Home) CheckOwner() error {
	fi, err := os.Stat(h.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d but cmlab runs as uid %d: %w; writing here would leave files its owner cannot open. Fix: run the command as the owner (e.g. sudo -u '#%d' cmlab …), or take the home over with chown -R %d %s",
			h.Dir, st.Uid, uid, ErrForeignHome, st.Uid, uid, ShellQuote(h.Dir))
	}
	return nil
}

// ValidateToken refuses a token with less than MinTokenBits of entropy,
// estimated as its length times the bits per character of the smallest
// alphabet it fits (hex 4, base64 6, printable ASCII log2(94)): 64 hex
// characters, 43 base64 characters. A token must be printable ASCII
// without spaces, so that it travels in a header unchanged.
func ValidateToken(tok string) error {
	hexOnly, b64 := true, true
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c <= ' ' || c > '~' {
			// The position only: an error must not carry bytes of a secret.
			return fmt.Errorf("%w: byte %d is not printable ASCII (or is a space)", ErrWeakToken, i)
		}
		isHex := c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		isB64 := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("+/-_=", c) >= 0
		hexOnly = hexOnly && isHex
		b64 = b64 && isB64
	}
	bitsPer := math.Log2(94)
	switch {
	case hexOnly:
		bitsPer = 4
	case b64:
		bitsPer = 6
	}
	if bits := float64(len(tok)) * bitsPer; bits < MinTokenBits {
		return fmt.Errorf("%w: %d characters carry about %d bits, want at least %d (e.g. 64 hex characters)", ErrWeakToken, len(tok), int(bits), MinTokenBits)
	}
	return nil
}

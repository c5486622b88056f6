package home

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newPrivateHome(t *testing.T) Home {
	t.Helper()
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.OperatorToken(); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOperatorTokenRefusesLooseHome: a home, state/ or state/token that
// group or others can read or write, or that is not a regular file, is
// refused with ErrNotPrivate, naming the path and the chmod that fixes it.
func TestOperatorTokenRefusesLooseHome(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(h Home) error
		path   func(h Home) string
		fix    string
	}{
		{"home 0755", func(h Home) error { return os.Chmod(h.Dir, 0o755) }, func(h Home) string { return h.Dir }, "chmod 700 "},
		{"home 0701", func(h Home) error { return os.Chmod(h.Dir, 0o701) }, func(h Home) string { return h.Dir }, "chmod 700 "},
		{"home 0770", func(h Home) error { return os.Chmod(h.Dir, 0o770) }, func(h Home) string { return h.Dir }, "chmod 700 "},
		{"state 0750", func(h Home) error { return os.Chmod(h.StateDir(), 0o750) }, func(h Home) string { return h.StateDir() }, "chmod 700 "},
		{"token 0644", func(h Home) error { return os.Chmod(h.TokenFile(), 0o644) }, func(h Home) string { return h.TokenFile() }, "chmod 600 "},
		{"token 0620", func(h Home) error { return os.Chmod(h.TokenFile(), 0o620) }, func(h Home) string { return h.TokenFile() }, "chmod 600 "},
		{"token symlink", func(h Home) error {
			other := filepath.Join(filepath.Dir(h.Dir), "elsewhere")
			if err := os.WriteFile(other, []byte(strings.Repeat("a", 64)), 0o600); err != nil {
				return err
			}
			os.Remove(h.TokenFile())
			return os.Symlink(other, h.TokenFile())
		}, func(h Home) string { return h.TokenFile() }, "rm "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newPrivateHome(t)
			if err := c.break_(h); err != nil {
				t.Fatal(err)
			}
			for name, f := range map[string]func() error{
				"OperatorToken": func() error { _, err := h.OperatorToken(); return err },
				"CheckPrivate":  h.CheckPrivate,
			} {
				err := f()
				if !errors.Is(err, ErrNotPrivate) {
					t.Fatalf("%s: %v, want ErrNotPrivate", name, err)
				}
				if msg := err.Error(); !strings.Contains(msg, c.path(h)) || !strings.Contains(msg, c.fix+c.path(h)) && c.fix != "rm " {
					t.Fatalf("%s: %q does not name %s and the fix %q", name, msg, c.path(h), c.fix)
				}
			}
		})
	}
}

// TestOperatorTokenRefusesForeignOwner: a home or token owned by another
// uid is refused, naming the chown fix. Needs root to chown.
func TestOperatorTokenRefusesForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to another uid; run the tests as root to cover it")
	}
	for _, which := range []string{"home", "token"} {
		t.Run(which, func(t *testing.T) {
			h := newPrivateHome(t)
			p := h.Dir
			if which == "token" {
				p = h.TokenFile()
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			_, err := h.OperatorToken()
			if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "owned by uid 65534") || !strings.Contains(err.Error(), "chown") || !strings.Contains(err.Error(), p) {
				t.Fatalf("OperatorToken: %v", err)
			}
			if which == "home" {
				if err := h.CheckOwner(); !errors.Is(err, ErrForeignHome) || !strings.Contains(err.Error(), "sudo -u '#65534'") {
					t.Fatalf("CheckOwner: %v", err)
				}
			}
		})
	}
}

// TestOperatorTokenRefusesWeakToken: a token file holding less than 256
// bits is refused with ErrWeakToken and the fix; a strong one is read back.
func TestOperatorTokenRefusesWeakToken(t *testing.T) {
	cases := []struct {
		tok string
		ok  bool
	}{
		{strings.Repeat("a", 63), false},
		{strings.Repeat("a", 64), true},
		{"tok", false},
		{"secret-password-1234", false},
		{strings.Repeat("Zz09", 10) + "zz", false}, // 42 base64 characters: 252 bits
		{strings.Repeat("Zz09", 10) + "zzz", true}, // 43: 258 bits
		{strings.Repeat("!", 39), false},
		{strings.Repeat("!", 40), true},
		{strings.Repeat("a", 40) + " " + strings.Repeat("a", 40), false},
		{strings.Repeat("é", 40), false},
	}
	for _, c := range cases {
		if err := ValidateToken(c.tok); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrWeakToken)) {
			t.Errorf("ValidateToken(%q) = %v, want ok=%v", c.tok, err, c.ok)
		}
	}
	h := newPrivateHome(t)
	if err := WriteFileAtomic(h.TokenFile(), []byte(strings.Repeat("a", 63)+"\n")); err != nil {
		t.Fatal(err)
	}
	_, err := h.OperatorToken()
	if !errors.Is(err, ErrWeakToken) || !strings.Contains(err.Error(), h.TokenFile()) || !strings.Contains(err.Error(), "rm "+h.TokenFile()) {
		t.Fatalf("weak token: %v", err)
	}
	strong := strings.Repeat("0123456789abcdef", 4)
	if err := WriteFileAtomic(h.TokenFile(), []byte(strong+"\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := h.OperatorToken(); err != nil || got != strong {
		t.Fatalf("strong token: %q %v", got, err)
	}
}

func TestCheckOwnerOwnHome(t *testing.T) {
	h := Home{Dir: filepath.Join(t.TempDir(), "missing")}
	if err := h.CheckOwner(); err != nil {
		t.Fatalf("missing home: %v", err)
	}
	if err := newPrivateHome(t).CheckOwner(); err != nil {
		t.Fatalf("own home: %v", err)
	}
}

// TestCopyTo: a copy holds every file's bytes (0600, directories 0700)
// but not state/daemon.json; a symlink in the home is refused; an
// existing destination is refused.
func TestCopyTo(t *testing.T) {
	h := newPrivateHome(t)
	os.WriteFile(h.FeedbackFile(), []byte("{\"a\":1}\n"), 0o644)
	os.WriteFile(h.DaemonFile(), []byte(`{"pid":1}`), 0o600)
	dst := filepath.Join(t.TempDir(), "copy")
	n, err := h.CopyTo(dst)
	if err != nil {
		t.Fatal(err)
	}
	c := Home{Dir: dst}
	b, err := os.ReadFile(c.FeedbackFile())
	fi, _ := os.Stat(c.FeedbackFile())
	if err != nil || string(b) != "{\"a\":1}\n" || fi.Mode().Perm() != FilePerm || n < int64(len(b)) {
		t.Fatalf("copied feedback %q %v %v, %d bytes", b, fi.Mode(), err, n)
	}
	if _, err := os.Stat(c.DaemonFile()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("daemon.json copied: %v", err)
	}
	if tok, err := c.OperatorToken(); err != nil || tok == "" {
		t.Fatalf("copy's token: %v", err)
	}
	if _, err := h.CopyTo(dst); err == nil {
		t.Fatal("copied over an existing destination")
	}
	os.Symlink("/etc/passwd", filepath.Join(h.Dir, "lab", "link"))
	if _, err := h.CopyTo(filepath.Join(t.TempDir(), "copy2")); err == nil || !strings.Contains(err.Error(), "link") {
		t.Fatalf("symlink copied: %v", err)
	}
}

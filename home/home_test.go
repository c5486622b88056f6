package home

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"lab_0190a1b2", true},
		{"conv-1.x", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{".", false},
		{"..", false},
		{"../etc", false},
		{"a/b", false},
		{"a b", false},
		{"a\x00b", false},
		{"ünï", false},
	} {
		err := ValidateID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateID(%q) error does not wrap ErrInvalidID: %v", tc.id, err)
		}
	}
	h := Home{Dir: t.TempDir()}
	if _, err := h.PtyDir("../x"); err == nil {
		t.Fatal("PtyDir accepted ../x")
	}
	if _, err := h.SessionDir(".."); err == nil {
		t.Fatal("SessionDir accepted ..")
	}
}

func TestResolve(t *testing.T) {
	t.Setenv("CMLAB_HOME", "/srv/cmlab-env")
	if h, _ := Resolve("/srv/flag"); h.Dir != "/srv/flag" {
		t.Fatalf("flag: %s", h.Dir)
	}
	if h, _ := Resolve(""); h.Dir != "/srv/cmlab-env" {
		t.Fatalf("env: %s", h.Dir)
	}
	t.Setenv("CMLAB_HOME", "")
	t.Setenv("HOME", "/srv/user")
	if h, _ := Resolve(""); h.Dir != "/srv/user/.cm" {
		t.Fatalf("default: %s", h.Dir)
	}
}

func TestEnsureAndTokenPermissions(t *testing.T) {
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{h.Dir, h.WALDir(), h.StateDir(), h.QuarantineDir(), h.ExportsDir()} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != DirPerm {
			t.Errorf("%s: mode %v, want %v", d, fi.Mode().Perm(), DirPerm)
		}
	}
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 64 {
		t.Fatalf("token %q: want 64 hex characters", tok)
	}
	fi, err := os.Stat(h.TokenFile())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != FilePerm {
		t.Fatalf("token file mode %v, want %v", fi.Mode().Perm(), FilePerm)
	}
	again, err := h.OperatorToken()
	if err != nil || again != tok {
		t.Fatalf("second OperatorToken() = %q, %v; want the same token", again, err)
	}
}

func TestWriteFileAtomicReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state", "checkpoint.json")
	if err := WriteFileAtomic(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("content %q, %v", b, err)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("%d files left beside it, want only the file", len(ents))
	}
}

// MkdirAllSync creates the missing directories (0700) and fsyncs the
// parent of each one it created, and only those; an existing directory
// costs no fsync; a file in the way is an error naming it.
func TestMkdirAllSync(t *testing.T) {
	root := t.TempDir()
	var synced []string
	rec := func(d string) error { synced = append(synced, d); return nil }
	dir := filepath.Join(root, "a", "b", "c")
	if err := mkdirAllSync(dir, rec); err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if !slices.Equal(synced, want) {
		t.Fatalf("fsynced %q, want %q", synced, want)
	}
	for _, d := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b"), dir} {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != DirPerm {
			t.Fatalf("%s: %v %v", d, fi, err)
		}
	}
	synced = nil
	if err := mkdirAllSync(dir, rec); err != nil || len(synced) != 0 {
		t.Fatalf("existing: %v, fsynced %q", err, synced)
	}
	if err := mkdirAllSync(filepath.Join(root, "a", "d"), rec); err != nil || !slices.Equal(synced, []string{filepath.Join(root, "a")}) {
		t.Fatalf("one level: %v, fsynced %q", err, synced)
	}
	file := filepath.Join(root, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	synced = nil
	for _, d := range []string{file, filepath.Join(file, "x")} {
		if err := mkdirAllSync(d, rec); err == nil || !strings.Contains(err.Error(), file) || len(synced) != 0 {
			t.Fatalf("%s: %v, fsynced %q", d, err, synced)
		}
	}
	failing := func(string) error { return errors.New("disk gone") }
	if err := mkdirAllSync(filepath.Join(root, "g"), failing); err == nil || !strings.Contains(err.Error(), "fsync "+root+": disk gone") {
		t.Fatalf("fsync failure: %v", err)
	}
}

// TestCheckDirsFixQuotesTheTarget: the fix printed for a linked directory
// names the link's target as a shell word (single quotes: a $ or a space
// in it is not expanded by a pasted command), resolved from the link's own
// directory when the link is relative.
func TestCheckDirsFixQuotesTheTarget(t *testing.T) {
	h := Home{Dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(h.Dir, "pty"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(h.Dir, "it's $HOME")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../it's $HOME", filepath.Join(h.Dir, "pty", "c1")); err != nil {
		t.Fatal(err)
	}
	err := h.CheckDirs()
	if !errors.Is(err, ErrLinkedDir) {
		t.Fatalf("CheckDirs = %v, want ErrLinkedDir", err)
	}
	want := "rm pty/c1 && cp -a " + ShellQuote(target) + " pty/c1"
	if !strings.Contains(err.Error(), want) || !strings.HasPrefix(ShellQuote(target), "'") || !strings.Contains(ShellQuote(target), `'\''`) {
		t.Fatalf("the fix does not read %q:\n%v", want, err)
	}
	// The command, pasted into a shell in the home, puts a copy in the
	// link's place and leaves the target as it was.
	os.WriteFile(filepath.Join(target, "f"), []byte("x"), 0o600)
	cmd := exec.Command("sh", "-c", want)
	cmd.Dir = h.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", want, err, out)
	}
	if fi, err := os.Lstat(filepath.Join(h.Dir, "pty", "c1")); err != nil || !fi.IsDir() {
		t.Fatalf("pty/c1 after the fix: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(h.Dir, "pty", "c1", "f")); err != nil || string(b) != "x" {
		t.Fatalf("pty/c1/f after the fix: %q %v", b, err)
	}
	if err := h.CheckDirs(); err != nil {
		t.Fatalf("CheckDirs after the fix: %v", err)
	}
}

// TestTokenFixesQuoteThePath: the fixes printed for state/token name the
// path in a command a tired operator pastes into a shell. In a home whose
// path has a space and a quote, an unquoted `chmod 600 /a/my lab/…` or
// `rm /a/my lab/…` acts on other files (and `chown -R UID /a/my lab`
// would take over a directory that is not the home). Each printed command,
// run in sh, fixes the token and touches nothing else.
func TestTokenFixesQuoteThePath(t *testing.T) {
	root := t.TempDir()
	h := Home{Dir: filepath.Join(root, "it's my lab")}
	if err := os.MkdirAll(h.StateDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	// What the unquoted commands would have hit.
	decoy := filepath.Join(root, "it")
	if err := os.WriteFile(decoy, []byte("decoy"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(cmdline string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", cmdline)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmdline, err, out)
		}
	}
	tok := h.TokenFile()

	// A token others can read: chmod 600.
	if err := os.WriteFile(tok, []byte(strings.Repeat("ab", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := h.CheckPrivate()
	want := "chmod 600 " + ShellQuote(tok)
	if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), want) {
		t.Fatalf("CheckPrivate = %v\nwant a fix reading %q", err, want)
	}
	run(want)
	if fi, err := os.Stat(tok); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the token after %q: %v %v", want, fi, err)
	}

	// A home others can enter: chmod 700.
	if err := os.Chmod(h.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err = h.CheckPrivate()
	want = "chmod 700 " + ShellQuote(h.Dir)
	if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), want) {
		t.Fatalf("CheckPrivate = %v\nwant a fix reading %q", err, want)
	}
	run(want)
	if fi, err := os.Stat(h.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the home after %q: %v %v", want, fi, err)
	}

	// A token that is a link: rm removes the link only.
	elsewhere := filepath.Join(root, "elsewhere")
	if err := os.WriteFile(elsewhere, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, tok); err != nil {
		t.Fatal(err)
	}
	err = h.CheckPrivate()
	want = "rm " + ShellQuote(tok)
	if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), want) {
		t.Fatalf("CheckPrivate = %v\nwant a fix reading %q", err, want)
	}
	run(want)
	if _, err := os.Lstat(tok); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link after %q: %v", want, err)
	}
	if b, err := os.ReadFile(elsewhere); err != nil || string(b) != "keep" {
		t.Fatalf("the link's target after %q: %q %v", want, b, err)
	}

	// A token too weak to use: rm.
	if err := os.WriteFile(tok, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = h.OperatorToken()
	want = "rm " + ShellQuote(tok)
	if !errors.Is(err, ErrWeakToken) || !strings.Contains(err.Error(), want) {
		t.Fatalf("OperatorToken = %v\nwant a fix reading %q", err, want)
	}
	run(want)
	if _, err := os.Lstat(tok); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the token after %q: %v", want, err)
	}
	if b, err := os.ReadFile(decoy); err != nil || string(b) != "decoy" {
		t.Fatalf("%s after the fixes: %q %v", decoy, b, err)
	}
}

// TestShellQuoteRoundTrip: a word ShellQuote makes is read back by sh as
// exactly the string (printf %s), and a plain path is left as it is.
func TestShellQuoteRoundTrip(t *testing.T) {
	if got := ShellQuote("/srv/cm-lab/state/token"); got != "/srv/cm-lab/state/token" {
		t.Fatalf("a plain path: %s", got)
	}
	for _, s := range []string{"", "/a b/c", "it's", "$HOME", "`id`", `back\slash`, "~", "a;rm -rf x", "*", "new\nline", "tab\t", "-n", "ümlaut", "x=y,z:w@v%u+t"} {
		out, err := exec.Command("sh", "-c", "printf %s "+ShellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("sh read %s back as %q (%v), want %q", ShellQuote(s), out, err, s)
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreKeyThatCannotBeReadNamesItsFix: restore given a key it cannot
// use — the archive's ship-key missing or not a key, a --key FILE that is
// not one — writes nothing and exits 1 naming the other ways to check the
// stream. The damage matrix found the archive's cases exiting 1 with the
// file's error alone (archive-ship-key × flip, truncate, delete,
// symlink-wal; archive-dir × delete, symlink-wal; × restore).
func TestRestoreKeyThatCannotBeReadNamesItsFix(t *testing.T) {
	url := testNATS(t)
	h := workloadHomeCLI(t, 5)
	id := shipAll(t, h, url, 5)
	key, err := os.ReadFile(filepath.Join(h.Dir, "state", "ship-key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args func(dir string) []string
	}{
		{"archive without its key", func(dir string) []string { return []string{"--key-from-archive", dir} }},
		{"archive key cut", func(dir string) []string {
			os.WriteFile(filepath.Join(dir, "ship-key"), key[:20], 0o600)
			return []string{"--key-from-archive", dir}
		}},
		{"key file not a key", func(dir string) []string {
			p := filepath.Join(dir, "key")
			os.WriteFile(p, []byte("not a key\n"), 0o600)
			return []string{"--key", p}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			into := filepath.Join(t.TempDir(), "restored")
			args := append([]string{"restore", "--nats", url, "--home-id", id, "--into", into}, tc.args(t.TempDir())...)
			code, out, errs := cli(t, args...)
			if code != exitError || !strings.Contains(errs, "  fix: ") || !strings.Contains(errs, "--unauthenticated") {
				t.Fatalf("restore %q: exit %d\n%s%s", args, code, out, errs)
			}
			if _, err := os.Stat(into); err == nil {
				t.Fatal("a refused restore created its directory")
			}
		})
	}
}

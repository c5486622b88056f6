package confine

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpen(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "secret")
	must(t, os.MkdirAll(filepath.Join(root, "sub"), 0o700))
	must(t, os.WriteFile(outside, []byte("SECRET"), 0o600))
	must(t, os.WriteFile(filepath.Join(root, "ok.json"), []byte("OK"), 0o600))
	must(t, os.WriteFile(filepath.Join(root, "sub", "deep.json"), []byte("DEEP"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(root, "link.json")))
	must(t, os.Symlink("ok.json", filepath.Join(root, "inner-link.json")))
	must(t, os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "dirlink")))
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo.json"), 0o600))
	must(t, os.Symlink(root, filepath.Join(base, "rootlink")))
	ln, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(t, err)
	defer ln.Close()

	for _, mode := range []bool{true, false} {
		for _, tc := range []struct {
			root, name, want string
			err              error
		}{
			{root, "ok.json", "OK", nil},
			{root, "sub/deep.json", "DEEP", nil},
			{root, "link.json", "", ErrSymlink},
			{root, "inner-link.json", "", ErrSymlink},
			{root, "dirlink/deep.json", "", errAny},
			{root, "fifo.json", "", ErrNotRegular},
			{root, "sub", "", ErrNotRegular},
			{root, "sock", "", ErrNotRegular},
			{root, "missing.json", "", fs.ErrNotExist},
			{root, "../secret", "", ErrOutside},
			{root, "sub/../../secret", "", ErrOutside},
			{root, "/etc/passwd", "", ErrOutside},
			{root, "", "", ErrOutside},
			{filepath.Join(base, "rootlink"), "ok.json", "", errAny},
			{"relative", "ok.json", "", ErrOutside},
		} {
			f, err := open(tc.root, tc.name, mode)
			if tc.err == nil {
				if err != nil {
					t.Errorf("openat2=%v %s/%s: %v", mode, tc.root, tc.name, err)
					continue
				}
				b, _ := io.ReadAll(f)
				f.Close()
				if string(b) != tc.want {
					t.Errorf("openat2=%v %s: %q, want %q", mode, tc.name, b, tc.want)
				}
				continue
			}
			if err == nil {
				f.Close()
				t.Errorf("openat2=%v %s/%s opened, want %v", mode, tc.root, tc.name, tc.err)
				continue
			}
			if tc.err != errAny && !errors.Is(err, tc.err) {
				t.Errorf("openat2=%v %s/%s: %v, want %v", mode, tc.root, tc.name, err, tc.err)
			}
		}
	}
	if _, err := ReadFile(root, "ok.json", 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over the limit: %v", err)
	}
	if b, err := ReadFile(root, "ok.json", 2); err != nil || string(b) != "OK" {
		t.Errorf("ReadFile: %q %v", b, err)
	}
}

var errAny = errors.New("any error")

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

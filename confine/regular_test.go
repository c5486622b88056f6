package confine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadRegular: a named file is read through a symlink, as the shell
// would; a FIFO without a writer, a device, a directory and a file over
// the limit are refused without reading, each error naming the path.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mandate.json")
	must(t, os.WriteFile(file, []byte("0123456789"), 0o600))
	must(t, os.Symlink(file, filepath.Join(dir, "link.json")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	for _, tc := range []struct {
		path string
		max  int64
		want string
		err  error
	}{
		{file, 10, "0123456789", nil},
		{filepath.Join(dir, "link.json"), 10, "0123456789", nil},
		{file, 9, "", ErrTooLarge},
		{filepath.Join(dir, "fifo"), 10, "", ErrNotRegular},
		{"/dev/zero", 10, "", ErrNotRegular},
		{dir, 10, "", ErrNotRegular},
		{filepath.Join(dir, "missing"), 10, "", os.ErrNotExist},
	} {
		b, err := ReadRegular(tc.path, tc.max)
		if tc.err == nil {
			if err != nil || string(b) != tc.want {
				t.Errorf("ReadRegular(%s) = %q, %v; want %q", tc.path, b, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("ReadRegular(%s, %d): %v, want %v naming the path", tc.path, tc.max, err, tc.err)
		}
	}
}

package main

import (
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// TestFilesystemErrorsNameTheirFix: the damage matrix found a full disk
// and an unreadable file of the home ending a command with exit 1 and no
// fix ("write ...: no space left on device", "open .../wal/LOCK:
// permission denied"). Each must name what to do.
func TestFilesystemErrorsNameTheirFix(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code, want string
	}{
		{fmt.Errorf("projections: write checkpoint: %w", &fs.PathError{Op: "write", Path: "/h/state/.checkpoint.json.tmp1", Err: syscall.ENOSPC}), "DISK_FULL", "free space"},
		{fmt.Errorf("wal: lock: %w", &fs.PathError{Op: "open", Path: "/h/wal/LOCK", Err: syscall.EACCES}), "PERMISSION", "/h/wal/LOCK"},
		{fmt.Errorf("wal: lock: %w", &fs.PathError{Op: "open", Path: "/h/wal/LOCK", Err: syscall.ELOOP}), "SYMLINK", "remove the link"},
	} {
		d := describeError("cmlab status", "/h", tc.err)
		if d.Code != tc.code || !strings.Contains(d.Fix, tc.want) {
			t.Fatalf("%v: code %q fix %q; want %s and a fix naming %q", tc.err, d.Code, d.Fix, tc.code, tc.want)
		}
	}
}

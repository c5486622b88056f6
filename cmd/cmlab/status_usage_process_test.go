package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// TestStatusLogBytesWrittenProcess (issue 28 B8): while a daemon runs,
// the log's last segment ends in preallocated zeros (wal/prealloc.go);
// `cmlab status` reports the bytes written (to the end of the last valid
// frame) apart from the bytes allocated, and names its version and
// whether the home is read-only. Before, logBytes summed the files'
// sizes, zeros included, and status without a daemon showed neither
// version nor mode.
func TestStatusLogBytesWrittenProcess(t *testing.T) {
	h := filepath.Join(t.TempDir(), "home")
	p, _ := serveProc(t, "--home", h, "--quiet")
	for i := 0; i < 3; i++ {
		if code, _, errs := cliRun(t, nil, "--home", h, "feedback", "add", "--notes", "n"); code != 0 {
			t.Fatalf("feedback add = %d %q", code, errs)
		}
	}
	// Written bytes as the log's own scan counts them: each segment's
	// size less the preallocated space ending the last.
	var want, alloc int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := wal.Stat(home.Home{Dir: h}.WALDir())
		if err != nil {
			t.Fatal(err)
		}
		want, alloc = 0, st.Bytes
		for _, s := range st.Segments {
			want += s.Size - s.Preallocated
		}
		if alloc > want || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the zeros are written in the background
	}
	if alloc <= want {
		t.Fatalf("no preallocated space while the daemon runs (%d bytes): the test proves nothing", alloc)
	}
	code, out, errs := cliRun(t, nil, "--home", h, "--json", "status")
	var rep struct {
		LogBytes          int64  `json:"logBytes"`
		LogAllocatedBytes int64  `json:"logAllocatedBytes"`
		Version           string `json:"version"`
		ReadOnly          *bool  `json:"readOnly"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("status --json = %d %v %q %q", code, err, out, errs)
	}
	if rep.LogBytes != want || rep.LogAllocatedBytes < alloc || !strings.HasPrefix(rep.Version, "cmlab ") || rep.ReadOnly == nil || *rep.ReadOnly {
		t.Errorf("status --json: logBytes %d (want %d written), logAllocatedBytes %d (want ≥ %d), version %q, readOnly %v", rep.LogBytes, want, rep.LogAllocatedBytes, alloc, rep.Version, rep.ReadOnly)
	}
	code, out, _ = cliRun(t, nil, "--home", h, "status")
	if !regexp.MustCompile(`(?m)^log:         \d+ bytes written in 1 segment\(s\) \(\d+ bytes on disk: the rest is space preallocated ahead of the writer\), last seq \d+$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^version:     cmlab \S+.*\(this command\); daemon \S+$`).MatchString(out) ||
		!strings.Contains(out, "\nmode:        read-write\n") ||
		!strings.Contains(out, fmt.Sprintf("\nretention:   %d bytes retained from seq 1,", want)) {
		t.Errorf("status = %d:\n%s", code, out)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)

	// No daemon: the version is this command's, the mode the home's own.
	into := filepath.Join(t.TempDir(), "replayed")
	if code, _, errs := cliRun(t, nil, "--home", h, "replay", "--to", "2", "--into", into); code != 0 {
		t.Fatalf("replay = %d %q", code, errs)
	}
	code, out, _ = cliRun(t, nil, "--home", into, "status")
	if !regexp.MustCompile(`(?m)^version:     cmlab \S+.*\(this command\)$`).MatchString(out) ||
		!strings.Contains(out, "\nmode:        read-only: a replay of "+h+" up to seq 2 ('cmlab serve' serves it read-only unless --writable)\n") ||
		!regexp.MustCompile(`(?m)^log:         (\d+) bytes written in 1 segment\(s\), last seq 2$`).MatchString(out) {
		t.Errorf("status of a replayed home = %d:\n%s", code, out)
	}
}

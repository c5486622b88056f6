package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/internal/cmhome"
)

// TestAdoptContentMachineHomeProcess (issue 28 A1): the CLI on a home
// content-machine's Lab wrote lists their runs and experiments (before:
// none, and their files moved to quarantine/), says on stderr what it
// adopted, leaves their files byte for byte, and status reports the
// adoption; a second command adopts nothing. `cmlab serve` on such a home
// logs the adoption in state/daemon.log and serves their records.
func TestAdoptContentMachineHomeProcess(t *testing.T) {
	h := filepath.Join(t.TempDir(), "cm")
	want, err := cmhome.Write(h, "/srv/cm")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := cliRun(t, nil, "--home", h, "status")
	if code != 1 || !strings.Contains(errs, "is a content-machine home that cmlab has not opened yet") || !strings.Contains(errs, "adopts it") {
		t.Errorf("status before adoption = %d %q %q", code, out, errs)
	}
	code, out, errs = cliRun(t, nil, "--home", h, "--json", "runs", "list")
	var list struct {
		Items []struct {
			RunID string `json:"runId"`
			Topic string `json:"topic"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("runs list = %d %v %q %q", code, err, out, errs)
	}
	var ids []string
	for _, r := range list.Items {
		ids = append(ids, r.RunID)
	}
	if strings.Join(ids, " ") != cmhome.RunBig+" "+cmhome.RunFull+" "+cmhome.RunMin {
		t.Errorf("runs list (newest first): %v", ids)
	}
	if !strings.Contains(errs, "cmlab: adopted a content-machine home: 3 run(s) (3 line(s) of lab/runs.jsonl), 2 experiment(s) (4 line(s) of lab/experiments.jsonl), 2 line(s) of lab/sessions/"+cmhome.Session+"/idempotency.jsonl, 3 line(s) of feedback/feedback.jsonl (state/adopted.json)\n") {
		t.Errorf("stderr of the adopting command: %q", errs)
	}
	for f, b := range want {
		if got, _ := os.ReadFile(filepath.Join(h, filepath.FromSlash(f))); !bytes.Equal(got, b) {
			t.Errorf("%s after adoption:\n%s\nwant:\n%s", f, got, b)
		}
	}
	if q, _ := os.ReadDir(filepath.Join(h, "quarantine")); len(q) != 0 {
		t.Errorf("quarantine/ holds %d file(s)", len(q))
	}
	if _, err := cmhome.Read(h); err != nil {
		t.Errorf("their reader: %v", err)
	}
	code, out, errs = cliRun(t, nil, "--home", h, "status")
	if code != 0 || !strings.Contains(out, "\nadopted:     adopted a content-machine home: 3 run(s)") {
		t.Errorf("status = %d:\n%s%s", code, out, errs)
	}
	if code, _, errs = cliRun(t, nil, "--home", h, "runs", "list"); code != 0 || strings.Contains(errs, "adopted") {
		t.Errorf("second runs list = %d %q", code, errs)
	}

	// serve: the daemon's log names the adoption.
	h2 := filepath.Join(t.TempDir(), "cm2")
	if _, err := cmhome.Write(h2, "/srv/cm"); err != nil {
		t.Fatal(err)
	}
	p, _ := serveProc(t, "--home", h2, "--quiet")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(h2, "state", "daemon.log"))
		if bytes.Contains(b, []byte("adopted a content-machine home: 3 run(s)")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state/daemon.log names no adoption:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out, errs = cliRun(t, nil, "--home", h2, "--json", "experiments", "list")
	if code != 0 || !strings.Contains(out, cmhome.ExpFull) || !strings.Contains(out, cmhome.ExpMin) || !strings.Contains(out, `"status": "done"`) {
		t.Errorf("experiments list = %d %s %s", code, out, errs)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/replay"
)

// TestReadOnlyServeOfReplayedHome replays the demo home to the moment the
// experiment was created (before its submit), serves the replayed home
// read-only, and checks that reads answer as of that moment and that every
// POST route is refused without touching the log or the views.
func TestReadOnlyServeOfReplayedHome(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	src := home.Home{Dir: filepath.Join(tmp, "demo")}
	demo, err := Demo(ctx, DemoOptions{Home: src, NoTerminal: true})
	if err != nil {
		t.Fatal(err)
	}
	log, err := replay.OpenLog(src.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	created, err := replay.Select(ctx, log, replay.Filter{Types: []string{events.TypeExperimentCreated}})
	if err != nil || len(created) != 1 {
		t.Fatalf("experiment.created events: %d, %v", len(created), err)
	}
	n := created[0].Seq
	at := home.Home{Dir: filepath.Join(tmp, "at")}
	if _, err := replay.To(ctx, replay.ToOptions{Src: src, Into: at, UpTo: n}); err != nil {
		t.Fatal(err)
	}
	before := viewSnapshot(t, at)

	dctx, stop := context.WithCancel(ctx)
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(dctx, daemon.Options{Home: at, Listen: "127.0.0.1:0", ReadOnly: true,
			Ready: func(info labapi.DaemonInfo) { ready <- info }})
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		stop()
		t.Fatalf("read-only daemon did not start: %v", err)
	}
	tok, err := at.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	c := labapi.NewClient(info.Listen, tok)

	var health struct {
		WalIndex uint64 `json:"walIndex"`
		ReadOnly bool   `json:"readOnly"`
	}
	if err := c.Do(ctx, "GET", "/api/health", "", nil, &health); err != nil || health.WalIndex != n || !health.ReadOnly {
		t.Fatalf("health %+v, %v; want walIndex %d read-only", health, err, n)
	}
	var exp struct {
		Status string `json:"status"`
	}
	if err := c.Do(ctx, "GET", "/api/experiments/"+demo.ExperimentID, "", nil, &exp); err != nil || exp.Status != "queued" {
		t.Fatalf("experiment as of seq %d: %+v, %v; want queued (not yet submitted)", n, exp, err)
	}
	var fb struct {
		Items []map[string]any `json:"items"`
	}
	if err := c.Do(ctx, "GET", "/api/feedback", "", nil, &fb); err != nil || len(fb.Items) != len(demo.FeedbackIDs) {
		t.Fatalf("feedback as of seq %d: %d items, %v; want %d", n, len(fb.Items), err, len(demo.FeedbackIDs))
	}
	var runs struct {
		Items []map[string]any `json:"items"`
	}
	if err := c.Do(ctx, "GET", "/api/runs", "", nil, &runs); err != nil || len(runs.Items) != 3 {
		t.Fatalf("runs: %d items, %v", len(runs.Items), err)
	}

	posts := []struct{ path, body string }{
		{"/api/feedback", `{"runId":"` + demo.Runs[0] + `","ratings":{"overall":50}}`},
		{"/api/runs/import", `{"path":"` + filepath.Join(src.Dir, "output", "runs", "baseline") + `"}`},
		{"/api/experiments", `{"name":"x","hypothesis":"y","topic":"z","baselineRunId":"` + demo.Runs[0] + `","variants":[{"label":"a","runId":"` + demo.Runs[1] + `"}]}`},
		{"/api/experiments/" + demo.ExperimentID + "/submit", `{"perRun":[{"runId":"` + demo.Runs[0] + `","ratings":{"overall":1}}]}`},
		{"/api/export", `{"sessionId":"` + demo.SessionID + `"}`},
		{"/api/pty/demo/exec_block", `{"cmd":"echo no"}`},
		{"/api/pty/demo/exec_interactive", `{"cmd":"cat"}`},
		{"/api/pty/demo/send", `{"data":"x"}`},
		{"/api/pty/demo/wait_for", `{"match":"x","match_type":"substring","from_cursor":0,"timeout_ms":10}`},
		{"/api/pty/demo/wait_prompt", `{"timeout_ms":10}`},
		{"/api/pty/demo/expect_send", `{"expect":"x","send":"y","from_cursor":0,"timeout_ms":10}`},
		{"/api/pty/demo/read_spool", `{"from_cursor":0}`},
		{"/api/pty/demo/end_session", `{}`},
		{"/api/pty/demo/reset", `{}`},
		{"/api/steps/" + demo.MandateID + "/plan", `{"steps":[]}`},
		{"/api/steps/" + demo.MandateID + "/executing", `{"step_id":"s1"}`},
		{"/api/steps/" + demo.MandateID + "/completed", `{"step_id":"s1"}`},
		{"/api/steps/" + demo.MandateID + "/failed", `{"step_id":"s1"}`},
		{"/api/steps/" + demo.MandateID + "/review", `{"step_id":"s1"}`},
		{"/api/recovery/apply", `{}`},
	}
	// wait_for, wait_prompt and read_spool are POSTs that only read: a
	// replayed home has no live terminal, so they may answer NOT_FOUND
	// instead of the read-only refusal. Either way nothing is appended.
	readOnlyPost := map[string]bool{"/api/pty/demo/wait_for": true, "/api/pty/demo/wait_prompt": true, "/api/pty/demo/read_spool": true}
	for i, p := range posts {
		err := c.Do(ctx, "POST", p.path, fmt.Sprintf("ro-%d", i), []byte(p.body), nil)
		var ae *labapi.APIError
		if !errors.As(err, &ae) {
			t.Errorf("POST %s: %v, want a refusal", p.path, err)
			continue
		}
		refused := ae.Status() == http.StatusForbidden && strings.Contains(strings.ToLower(ae.Message), "read-only")
		if !refused && !(readOnlyPost[p.path] && ae.Status() == http.StatusNotFound) {
			t.Errorf("POST %s: %v, want 403 read-only", p.path, err)
		}
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	atLog, err := replay.OpenLog(at.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	if last, err := atLog.LastSeq(ctx); err != nil || last != n {
		t.Fatalf("replayed log ends at %d (%v) after the read-only daemon, want %d", last, err, n)
	}
	after := viewSnapshot(t, at)
	if len(after) != len(before) {
		t.Fatalf("view files changed: %v → %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	for f, b := range before {
		if after[f] != b {
			t.Errorf("%s changed while serving read-only", f)
		}
	}
}

// viewSnapshot reads every view file of h.
func viewSnapshot(t *testing.T, h home.Home) map[string]string {
	t.Helper()
	files, err := projections.ViewFiles(h)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
)

func sha256Of(c byte) string { return "sha256-" + strings.Repeat(string(c), 64) }

// snapshotHome makes a home of many small segments holding steps (some
// awaiting review), terminal blocks (some left open), runs and feedback,
// written through an in-process server (so every read model's snapshot is
// written when it closes). Its events are 5 hours old but the last
// round's, so the auto-resume window starts in the last segment; review
// and open blocks come in the last rounds, so the log's front can go.
func snapshotHome(t *testing.T, rounds int) home.Home {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	now := time.Now()
	clock := now.Add(-5 * time.Hour)
	old := true
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 32 << 10, NoSync: true,
		Now: func() time.Time {
			if !old {
				return time.Now()
			}
			clock = clock.Add(time.Millisecond)
			return clock
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: "127.0.0.1:0", SessionID: "lab_t", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c := labapi.NewLocalClient(srv.Handler(), srv.OperatorToken())
	ctx := context.Background()
	add := func(stream string, p events.Payload) {
		t.Helper()
		if _, err := eng.Append(ctx, events.MustNew(stream, p)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range rounds {
		if i == rounds-1 {
			old = false
		}
		m := fmt.Sprintf("m%d", i)
		add(m, &events.StepPlanned{MandateID: m, Spec: []byte(`{"x":1}`), Steps: []events.PlannedStep{
			{StepID: "a", Tool: "sh", ParamsHash: sha256Of('1'), IdemKey: m + "a"}, {StepID: "b", Tool: "sh", ParamsHash: sha256Of('2'), IdemKey: m + "b"}}})
		add(m, &events.StepExecuting{MandateID: m, StepID: "a", ObservedPreHash: sha256Of('3')})
		add(m, &events.StepCompleted{MandateID: m, StepID: "a", PostHash: sha256Of('4'), ResultHash: sha256Of('5')})
		if i%3 == 0 && i >= rounds-8 { // late, so that the log's front can go
			add(m, &events.StepNeedsReview{MandateID: m, StepID: "b", Reason: "operator"})
		} else {
			add(m, &events.StepFailed{MandateID: m, StepID: "b", ErrorClass: "exit_status"})
		}
		blk := fmt.Sprintf("blk_%d", i)
		add("conv", &events.PtyBlockBegin{Block: events.Block{BlockID: blk, Cmd: "make " + blk, Mode: "block", Status: "running"}})
		if i%4 != 1 || i < rounds-8 {
			add("conv", &events.PtyBlockEnd{Block: events.Block{BlockID: blk, Status: "done"}})
		}
		add("lab_t", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: fmt.Sprintf("run_%d", i), SessionID: "lab_t",
			ArtifactsDir: "/r/" + m, ArtifactsDirRealpath: "/r/" + m, Topic: "t" + m}})
		for j := range 20 {
			body := map[string]any{"notes": fmt.Sprintf("note %d/%d", i, j), "ratings": map[string]any{"overall": j}}
			if err := c.Do(ctx, "POST", "/api/feedback", fmt.Sprintf("rq-%d-%d", i, j), body, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv.Close()
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// garbleEarlySegments overwrites every segment but the last keep with
// junk of the same size, and checks the log no longer reads from seq 1.
func garbleEarlySegments(t *testing.T, h home.Home, keep int) {
	t.Helper()
	segs, err := wal.Segments(h.WALDir())
	if err != nil || len(segs) < keep+3 {
		t.Fatalf("%d segments: %v", len(segs), err)
	}
	for _, s := range segs[:len(segs)-keep] {
		p := filepath.Join(h.WALDir(), s.Name)
		if err := os.WriteFile(p, bytes.Repeat([]byte{0xa5}, int(s.Size)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := wal.OpenReader(h.WALDir())
	for _, err := range r.Events(1) {
		if err != nil {
			return
		}
	}
	t.Fatal("the garbled log still reads from seq 1: the test proves nothing")
}

// awaitingReviewFromView is the old answer: steps/steps.jsonl read whole,
// the last record per step wins.
func awaitingReviewFromView(t *testing.T, h home.Home) []string {
	f, err := os.Open(h.StepsFile())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last := map[string]string{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct{ MandateID, StepID, Status string }
		var raw map[string]any
		json.Unmarshal(sc.Bytes(), &raw)
		rec.MandateID, _ = raw["mandate_id"].(string)
		rec.StepID, _ = raw["step_id"].(string)
		rec.Status, _ = raw["status"].(string)
		k := rec.MandateID + "/" + rec.StepID
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = rec.Status
	}
	out := []string{}
	for _, k := range order {
		if last[k] == events.StatusNeedsReview {
			out = append(out, k)
		}
	}
	return out
}

// TestStatusFromSnapshot: status answers from the retention model's
// snapshot and the log's tail. Its report equals the full-replay answers
// (steps.jsonl for review, pty.ScanLeftOpen of the whole log, a
// compaction planned from a replayed model); its output is byte for byte
// the one it gives with no snapshot (a replay) and the one it gives once
// every segment but the last two is garbage (so it cannot have read the
// log from seq 1).
func TestStatusFromSnapshot(t *testing.T) {
	h := snapshotHome(t, 40)
	code, text, errs := cli(t, "status", "--home", h.Dir)
	if code != 0 {
		t.Fatalf("status: %d %s", code, errs)
	}
	_, js, _ := cli(t, "status", "--home", h.Dir, "--json")
	var rep statusReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	// Full replay answers.
	r, _ := wal.OpenReader(h.WALDir())
	last, _ := r.LastSeq()
	lo, err := pty.ScanLeftOpen(r.Events(1))
	if err != nil {
		t.Fatal(err)
	}
	full := retention.New()
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		full.Observe(ev)
	}
	src, _ := compact.ReaderSource(h.WALDir())
	plan, err := compact.Plan(context.Background(), src, compact.Options{Home: h, ReadModels: daemon.ReadModels(), Archive: "(status)", DryRun: true, Model: full})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LastSeq != last || rep.Health == nil || rep.Health.Status != "ok" || rep.Health.WalIndex != last {
		t.Fatalf("last seq %d, health %+v; log at %d", rep.LastSeq, rep.Health, last)
	}
	if want := awaitingReviewFromView(t, h); !reflect.DeepEqual(rep.AwaitReview, want) || len(want) < 2 {
		t.Fatalf("awaiting review %v, steps.jsonl says %v", rep.AwaitReview, want)
	}
	if !reflect.DeepEqual(rep.LeftOpen, lo.Blocks) || len(lo.Blocks) < 2 {
		t.Fatalf("left open %+v, the log says %+v", rep.LeftOpen, lo.Blocks)
	}
	if rep.Compaction.ReclaimableBytes != plan.Bytes || plan.Bytes == 0 || rep.Compaction.Error != "" {
		t.Fatalf("reclaimable %d (%s), a replayed plan says %d", rep.Compaction.ReclaimableBytes, rep.Compaction.Error, plan.Bytes)
	}
	// No snapshot: the whole log is read; the same bytes.
	if err := os.Remove(retention.SnapshotFile(h)); err != nil {
		t.Fatal(err)
	}
	if _, text2, _ := cli(t, "status", "--home", h.Dir); text2 != text {
		t.Fatalf("without a snapshot:\n%s\nwith one:\n%s", text2, text)
	}
	// It wrote the snapshot it rebuilt (a long tail, no daemon).
	if _, info, err := retention.Load(h); err != nil || info.SnapshotSeq != last || info.Read != 0 {
		t.Fatalf("snapshot after status: %+v %v", info, err)
	}
	garbleEarlySegments(t, h, 2)
	code, text3, errs := cli(t, "status", "--home", h.Dir)
	if code != 0 || text3 != text {
		t.Fatalf("status on a log unreadable from seq 1: %d %s\n%s\nwant\n%s", code, errs, text3, text)
	}
	if _, js3, _ := cli(t, "status", "--home", h.Dir, "--json"); js3 != js {
		t.Fatalf("--json differs:\n%s\nwant\n%s", js3, js)
	}
}

// TestStatusRefusesDamagedSnapshot: a truncated or garbled retention
// snapshot is never trusted; status rebuilds from the log and prints the
// same bytes.
func TestStatusRefusesDamagedSnapshot(t *testing.T) {
	h := snapshotHome(t, 12)
	_, want, _ := cli(t, "status", "--home", h.Dir)
	path := retention.SnapshotFile(h)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"truncated": good[:len(good)-9],
		"garbled":   append(append(bytes.Clone(good[:40]), bytes.Repeat([]byte{0xff}, 16)...), good[56:]...),
		"empty":     {},
	} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := retention.Load(h); err != nil {
			t.Fatal(err)
		}
		if _, got, _ := cli(t, "status", "--home", h.Dir); got != want {
			t.Fatalf("%s snapshot: status\n%s\nwant\n%s", name, got, want)
		}
	}
}

// TestLocalReadsEqualTheRoutes: without a daemon, step list, runs list and
// feedback poll answer from the snapshots and the log's tail (or the view
// file); each answer equals the route's through an in-process server that
// replays the log, and the commands print the same bytes when the log
// before the snapshots is garbage.
func TestLocalReadsEqualTheRoutes(t *testing.T) {
	h := snapshotHome(t, 30)
	ctx := context.Background()
	norm := func(v any) string {
		b, _ := json.Marshal(v)
		var x any
		json.Unmarshal(b, &x)
		out, _ := json.Marshal(x)
		return string(out)
	}
	type read struct {
		path  string
		local func() (any, error)
	}
	reads := []read{
		{"/api/steps", func() (any, error) { return labapi.ReadStepsList(h, "") }},
		{"/api/steps?mandateId=m3", func() (any, error) { return labapi.ReadStepsList(h, "m3") }},
		{"/api/runs", func() (any, error) { return labapi.ReadRunsList(h) }},
		{"/api/feedback?since=0", func() (any, error) { return labapi.ReadFeedbackPage(h, "0", "", "") }},
		{"/api/feedback?since=0&limit=7", func() (any, error) { return labapi.ReadFeedbackPage(h, "0", "", "7") }},
	}
	var locals []string
	for _, rd := range reads {
		v, err := rd.local()
		if err != nil {
			t.Fatalf("%s locally: %v", rd.path, err)
		}
		locals = append(locals, norm(v))
	}
	// The routes over the home opened in-process, with no snapshot: a replay.
	for _, f := range []string{steps.SnapshotFile(h), labapi.LabStoreFile(h)} {
		os.Remove(f)
	}
	c, closeFn, err := daemon.Dial(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	for i, rd := range reads {
		var raw json.RawMessage
		if err := c.Do(ctx, "GET", rd.path, "", nil, &raw); err != nil {
			t.Fatal(err)
		}
		if got := norm(raw); got != locals[i] {
			t.Fatalf("%s: the route says\n%s\nthe local read\n%s", rd.path, got, locals[i])
		}
	}
	closeFn() // writes the snapshots again
	// An unknown mandate is the route's error.
	if _, err := labapi.ReadStepsList(h, "nope"); err == nil || !strings.Contains(err.Error(), "no mandate nope") {
		t.Fatalf("unknown mandate: %v", err)
	}
	var outs []string
	cmds := [][]string{{"step", "list"}, {"step", "list", "m3"}, {"step", "list", "--json"}, {"runs", "list"}, {"runs", "list", "--json"},
		{"feedback", "poll", "--since", "0"}, {"feedback", "poll", "--since", "0", "--limit", "5", "--json"}}
	for _, args := range cmds {
		code, out, errs := cli(t, append(args, "--home", h.Dir)...)
		if code != 0 || out == "" {
			t.Fatalf("%v: %d %s", args, code, errs)
		}
		outs = append(outs, out)
	}
	garbleEarlySegments(t, h, 2)
	for i, args := range cmds {
		code, out, errs := cli(t, append(args, "--home", h.Dir)...)
		if code != 0 || out != outs[i] {
			t.Fatalf("%v on a log unreadable from seq 1: %d %s\n%s\nwant\n%s", args, code, errs, out, outs[i])
		}
	}
}

// TestStatusCheckpointLine: the text output's checkpoint line is the seq
// of a checkpoint projections trusts, "none" without one, and says so when
// the checkpoint is damaged (it used to print the seq of any valid JSON);
// --json still carries the file itself.
func TestStatusCheckpointLine(t *testing.T) {
	h := snapshotHome(t, 6)
	cp, err := projections.ReadCheckpoint(h)
	if err != nil || cp == nil || cp.Seq == 0 {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	line := func() string {
		t.Helper()
		code, text, errs := cli(t, "status", "--home", h.Dir)
		if code != 0 {
			t.Fatalf("status: %d %s", code, errs)
		}
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "checkpoint:") {
				return l
			}
		}
		t.Fatalf("no checkpoint line in\n%s", text)
		return ""
	}
	if got, want := line(), fmt.Sprintf("checkpoint:  seq %d", cp.Seq); got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	_, js, _ := cli(t, "status", "--home", h.Dir, "--json")
	var rep struct {
		Checkpoint projections.Checkpoint `json:"checkpoint"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || rep.Checkpoint.Seq != cp.Seq || len(rep.Checkpoint.Views) != len(cp.Views) {
		t.Fatalf("--json checkpoint %+v %v", rep.Checkpoint, err)
	}
	good, err := os.ReadFile(h.CheckpointFile())
	if err != nil {
		t.Fatal(err)
	}
	// A changed seq that is still valid JSON: the sum refuses it.
	bad := bytes.Replace(good, []byte(fmt.Sprintf(`"seq":%d,`, cp.Seq)), []byte(fmt.Sprintf(`"seq":%d,`, cp.Seq+1)), 1)
	if bytes.Equal(bad, good) {
		t.Fatal("no seq to change")
	}
	if err := os.WriteFile(h.CheckpointFile(), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := line(); !strings.HasPrefix(got, "checkpoint:  not trusted: ") || !strings.Contains(got, "sum") {
		t.Fatalf("damaged checkpoint: %q", got)
	}
	if err := os.Remove(h.CheckpointFile()); err != nil {
		t.Fatal(err)
	}
	if got := line(); got != "checkpoint:  none" {
		t.Fatalf("no checkpoint: %q", got)
	}
}

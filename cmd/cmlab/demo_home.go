package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/replay"
	"github.com/cmlab/cmlab/steps"
)

// DemoOptions configure Demo.
type DemoOptions struct {
	// Home is the sample home to create; it must not exist or be empty.
	Home home.Home
	// Log receives one progress line per action (default: discarded).
	Log io.Writer
	// NoTerminal skips the real shell: the terminal session is written as
	// events instead (for machines without a usable pty).
	NoTerminal bool
}

// DemoResult names what Demo created, for the walk-through.
type DemoResult struct {
	SessionID       string   `json:"sessionId"`
	Runs            []string `json:"runs"`
	FeedbackIDs     []string `json:"feedbackIds"`
	ExperimentID    string   `json:"experimentId"`
	SubmitRequestID string   `json:"submitRequestId"`
	SubmitFeedback  []string `json:"submitFeedbackIds"`
	Conversation    string   `json:"conversation"`
	Blocks          []string `json:"blocks"`
	TerminalVia     string   `json:"terminalVia"` // "shell" or "events"
	MandateID       string   `json:"mandateId"`
	LastSeq         uint64   `json:"lastSeq"`
}

// Demo request ids and names, fixed so the walk-through can quote them.
const (
	DemoSubmitRequest = "demo-submit-1"
	DemoConversation  = "demo"
	DemoMandate       = "demo-mandate"
)

// Demo builds a sample home by driving a real daemon on a loopback port:
// three imported runs (small artifact directories with script.json and a
// placeholder video.mp4 under DIR/output/runs/), two feedback entries, an
// experiment and its submitted comparison, and a terminal session with two
// blocks. Then, with the daemon stopped, it runs a three-step mandate
// through the durable step journal (commands in DIR/jobs/) and "crashes"
// it: step s2's side effect lands but its completion is never recorded,
// and s2 declares no expected post-state — the crash that needs a human.
func Demo(ctx context.Context, opts DemoOptions) (*DemoResult, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	h := opts.Home
	if err := replay.EnsureEmpty(h.Dir); err != nil {
		return nil, err
	}
	if err := h.Ensure(); err != nil {
		return nil, err
	}
	res := &DemoResult{Conversation: DemoConversation, MandateID: DemoMandate}
	runDirs, err := demoArtifacts(h.Dir)
	if err != nil {
		return nil, err
	}
	if err := demoLab(ctx, opts, runDirs, res); err != nil {
		return nil, err
	}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	if res.TerminalVia == "events" {
		if err := demoTerminalEvents(ctx, eng, res); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Log, "terminal: wrote a session of %d blocks as events\n", len(res.Blocks))
	}
	if err := demoMandate(ctx, eng, h.Dir, opts.Log); err != nil {
		return nil, err
	}
	res.LastSeq = eng.Log().LastSeq()
	return res, eng.Close()
}

// demoArtifacts writes three run directories.
func demoArtifacts(dir string) ([]string, error) {
	var out []string
	for i, name := range []string{"baseline", "fast-cuts", "big-captions"} {
		d := filepath.Join(dir, "output", "runs", name)
		if err := os.MkdirAll(d, home.DirPerm); err != nil {
			return nil, err
		}
		script := fmt.Sprintf(`{"schemaVersion":1,"title":"Why cats knock things over (%s)","scenes":[{"text":"Cats test gravity.","durationMs":%d}]}`+"\n", name, 2000+500*i)
		if err := os.WriteFile(filepath.Join(d, "script.json"), []byte(script), home.FilePerm); err != nil {
			return nil, err
		}
		// Not a playable video: a few bytes so range requests have something to serve.
		video := append([]byte("\x00\x00\x00\x18ftypmp42"), bytes.Repeat([]byte{byte(i)}, 64)...)
		if err := os.WriteFile(filepath.Join(d, "video.mp4"), video, home.FilePerm); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// demoLab runs a daemon and drives the Lab and the terminal through its API.
func demoLab(ctx context.Context, opts DemoOptions, runDirs []string, res *DemoResult) (err error) {
	d, err := daemon.Start(ctx, daemon.Options{Home: opts.Home, Listen: "127.0.0.1:0", AllowRoots: []string{opts.Home.Dir}})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("demo daemon did not start: %w", err)
	}
	defer func() {
		if derr := d.Stop(); err == nil && derr != nil && !errors.Is(derr, context.Canceled) {
			err = fmt.Errorf("demo daemon: %w", derr)
		}
	}()
	info := d.Info
	res.SessionID = info.SessionID
	// The daemon's Unix socket, as every command reaches it: the operator
	// token never crosses TCP.
	c, closeClient, err := labapi.Dial(ctx, opts.Home, labapi.DialOptions{})
	if err != nil {
		return err
	}
	defer closeClient()
	if !c.Remote {
		return fmt.Errorf("demo daemon (pid %d) is not reachable over state/daemon.sock", info.Pid)
	}
	call := func(path, req string, in, out any) error {
		if err := c.Do(ctx, "POST", path, req, in, out); err != nil {
			return fmt.Errorf("demo: POST %s: %w", path, err)
		}
		return nil
	}
	for i, d := range runDirs {
		var out struct {
			RunID string `json:"runId"`
		}
		if err := call("/api/runs/import", fmt.Sprintf("demo-import-%d", i+1), map[string]any{"path": d, "topic": "cats and gravity"}, &out); err != nil {
			return err
		}
		res.Runs = append(res.Runs, out.RunID)
		fmt.Fprintf(opts.Log, "imported %s as %s\n", filepath.Base(d), out.RunID)
	}
	for i, fb := range []map[string]any{
		{"runId": res.Runs[0], "ratings": map[string]int{"overall": 62, "hook": 55, "pacing": 70}, "notes": "solid but slow start", "tags": []string{"baseline"}},
		{"runId": res.Runs[1], "ratings": map[string]int{"overall": 78, "pacing": 85}, "notes": "cuts land on the beat"},
	} {
		var out struct {
			FeedbackID string `json:"feedbackId"`
		}
		if err := call("/api/feedback", fmt.Sprintf("demo-feedback-%d", i+1), fb, &out); err != nil {
			return err
		}
		res.FeedbackIDs = append(res.FeedbackIDs, out.FeedbackID)
		fmt.Fprintf(opts.Log, "feedback %s on %s\n", out.FeedbackID, fb["runId"])
	}
	var exp struct {
		ExperimentID string `json:"experimentId"`
	}
	if err := call("/api/experiments", "demo-experiment-1", map[string]any{
		"name": "Faster cuts vs bigger captions", "hypothesis": "Faster cuts hold attention better than bigger captions",
		"topic": "cats and gravity", "baselineRunId": res.Runs[0],
		"variants":  []map[string]string{{"label": "fast cuts", "runId": res.Runs[1]}, {"label": "big captions", "runId": res.Runs[2]}},
		"questions": []map[string]string{{"id": "q1", "prompt": "Did the hook land in the first second?", "type": "yes_no_unsure"}},
	}, &exp); err != nil {
		return err
	}
	res.ExperimentID = exp.ExperimentID
	fmt.Fprintf(opts.Log, "experiment %s created\n", exp.ExperimentID)
	var got struct {
		Variants []struct {
			VariantID string `json:"variantId"`
			RunID     string `json:"runId"`
		} `json:"variants"`
	}
	if err := c.Do(ctx, "GET", "/api/experiments/"+exp.ExperimentID, "", nil, &got); err != nil {
		return fmt.Errorf("demo: GET experiment: %w", err)
	}
	if len(got.Variants) != 2 {
		return fmt.Errorf("demo: experiment has %d variants, want 2", len(got.Variants))
	}
	var sub struct {
		FeedbackIDs []string `json:"feedbackIds"`
	}
	if err := call("/api/experiments/"+exp.ExperimentID+"/submit", DemoSubmitRequest, map[string]any{
		"winnerVariantId": got.Variants[0].VariantID, "reason": "the cuts keep the cat moving",
		"answers": map[string]string{"q1": "yes"},
		"perRun": []map[string]any{
			{"runId": res.Runs[0], "variantId": "baseline", "ratings": map[string]int{"overall": 60}, "notes": "slow start"},
			{"runId": res.Runs[1], "variantId": got.Variants[0].VariantID, "ratings": map[string]int{"overall": 81, "pacing": 88}, "notes": "best pacing"},
			{"runId": res.Runs[2], "variantId": got.Variants[1].VariantID, "ratings": map[string]int{"overall": 64, "captions": 90}, "notes": "readable, but static"},
		},
	}, &sub); err != nil {
		return err
	}
	res.SubmitRequestID, res.SubmitFeedback = DemoSubmitRequest, sub.FeedbackIDs
	fmt.Fprintf(opts.Log, "submitted %s (request %s): feedback %v\n", exp.ExperimentID, DemoSubmitRequest, sub.FeedbackIDs)

	if opts.NoTerminal {
		res.TerminalVia = "events"
		return nil
	}
	if err := demoShell(ctx, c, res, opts.Log); err != nil {
		fmt.Fprintf(opts.Log, "terminal: the real shell failed (%v); writing the session as events\n", err)
		res.Blocks, res.TerminalVia = nil, "events"
		return nil
	}
	res.TerminalVia = "shell"
	return nil
}

// demoShell runs two blocks in a real shell through the terminal bridge.
func demoShell(ctx context.Context, c *labapi.Client, res *DemoResult, log io.Writer) error {
	p := "/api/pty/" + DemoConversation + "/"
	for i, cmd := range []string{"echo hello from the demo", "printf 'one\\ntwo\\nthree\\n' | wc -l"} {
		var out struct {
			OK      bool   `json:"ok"`
			BlockID string `json:"block_id"`
		}
		if err := c.Do(ctx, "POST", p+"exec_block", fmt.Sprintf("demo-block-%d", i+1), map[string]any{"cmd": cmd}, &out); err != nil {
			return err
		}
		if !out.OK || out.BlockID == "" {
			return fmt.Errorf("exec_block %q refused", cmd)
		}
		var w struct {
			OK bool `json:"ok"`
		}
		if err := c.Do(ctx, "POST", p+"wait_prompt", fmt.Sprintf("demo-wait-%d", i+1), map[string]any{"timeout_ms": 20000}, &w); err != nil {
			return err
		}
		res.Blocks = append(res.Blocks, out.BlockID)
		fmt.Fprintf(log, "terminal block %s: %s\n", out.BlockID, cmd)
	}
	return nil
}

// demoTerminalEvents writes a finished two-block terminal session as events.
func demoTerminalEvents(ctx context.Context, eng *engine.Engine, res *DemoResult) error {
	conv := DemoConversation
	now := time.Now().UnixMilli()
	var evs []*events.Event
	add := func(p events.Payload) { evs = append(evs, events.MustNew(conv, p)) }
	add(&events.PtySessionStarted{ConversationID: conv, ShellID: "sh_demo", Pid: 0, Cols: 120, Rows: 40, Cwd: "/"})
	var spool int64
	for i, c := range []struct{ cmd, out string }{{"echo hello from the demo", "hello from the demo\n"}, {"printf 'one\\ntwo\\nthree\\n' | wc -l", "3\n"}} {
		id := fmt.Sprintf("blk_demo%d", i+1)
		zero := 0
		b := events.Block{BlockID: id, Seq: i + 1, Mode: "block", ShellID: "sh_demo", Cmd: c.cmd, Cwd: "/", TsBegin: now,
			Status: events.BlockRunning, OutputPath: "blocks/" + id + ".out", SpoolBegin: spool}
		add(&events.PtyBlockBegin{Block: b})
		add(&events.PtyInput{Data: []byte(c.cmd + "\n"), BlockID: id, Source: "exec"})
		add(&events.PtyOutput{BlockID: id, SpoolOffset: spool, Data: []byte(c.out)})
		spool += int64(len(c.out))
		b.Status, b.ExitCode, b.TsEnd, b.SpoolEnd = events.BlockCompleted, &zero, now, spool
		add(&events.PtyBlockEnd{Block: b})
		res.Blocks = append(res.Blocks, id)
	}
	_, err := eng.Append(ctx, evs...)
	return err
}

// demoMandateSpec is the crashed mandate: s1 and s3 declare their expected
// post-state, s2 does not.
const demoMandateSpec = `{"id":"` + DemoMandate + `","name":"render notes","steps":[` +
	`{"id":"s1","argv":["sh","-c","printf 'draft\\n' > notes.txt"],"env":["PATH"],"world":["notes.txt"],"expect_post":{"notes.txt":"draft\n"}},` +
	`{"id":"s2","argv":["sh","-c","printf 'rendered\\n' >> render.log"],"env":["PATH"],"world":["render.log"]},` +
	`{"id":"s3","argv":["sh","-c","printf 'published\\n' > publish.txt"],"env":["PATH"],"world":["publish.txt"],"expect_post":{"publish.txt":"published\n"}}]}`

// demoMandate plans the mandate, completes s1 and leaves s2 executing
// after its side effect: what a daemon killed at that moment leaves behind.
func demoMandate(ctx context.Context, eng *engine.Engine, dir string, log io.Writer) error {
	work := filepath.Join(dir, "jobs")
	if err := os.MkdirAll(work, home.DirPerm); err != nil {
		return err
	}
	spec := []byte(demoMandateSpec)
	if err := os.WriteFile(filepath.Join(work, "mandate.json"), spec, home.FilePerm); err != nil {
		return err
	}
	m, err := steps.ParseMandate(spec)
	if err != nil {
		return err
	}
	j, err := steps.NewJournal(eng)
	if err != nil {
		return err
	}
	r, err := steps.NewRunner(steps.RunnerOptions{Recorder: j, Base: work})
	if err != nil {
		return err
	}
	plan, err := r.PlanOf(m, spec)
	if err != nil {
		return err
	}
	if err := j.Record(ctx, plan); err != nil {
		return err
	}
	for _, step := range plan.Steps[:2] {
		ms := m.Steps[indexOf(plan, step.StepID)]
		pre, err := steps.WorldHash(step.Dir, step.World)
		if err != nil {
			return err
		}
		if err := j.Record(ctx, &events.StepExecuting{MandateID: plan.MandateID, StepID: step.StepID, IdemKey: step.IdemKey, ObservedPreHash: pre}); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, ms.Argv[0], ms.Argv[1:]...)
		cmd.Dir = step.Dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("demo step %s: %w", step.StepID, err)
		}
		// As 'cmlab run' captures it, for 'cmlab step show'.
		if w, closeOut, err := steps.CaptureOutput(eng.Home())(plan.MandateID, step.StepID); err == nil {
			w.Write(out)
			closeOut()
		}
		if step.StepID == "s2" {
			fmt.Fprintf(log, "mandate %s: s1 completed, s2 ran but its completion was never recorded (simulated crash)\n", plan.MandateID)
			return nil
		}
		post, err := steps.WorldHash(step.Dir, step.World)
		if err != nil {
			return err
		}
		zero := 0
		digest := steps.HashBytes(out)
		if err := j.Record(ctx, &events.StepCompleted{MandateID: plan.MandateID, StepID: step.StepID, PostHash: post,
			ResultHash: steps.ResultHash(0, digest), ExitCode: &zero, OutputDigest: digest}); err != nil {
			return err
		}
	}
	return nil
}

func indexOf(p *events.StepPlanned, id string) int {
	for i, s := range p.Steps {
		if s.StepID == id {
			return i
		}
	}
	return 0
}

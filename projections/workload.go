package projections

import (
	"encoding/json"
	"fmt"
	"iter"
	"math/rand/v2"

	"github.com/cmlab/cmlab/events"
)

// Workload kinds.
const (
	// WorkloadMixedLab is the rebuild benchmark's mix: feedback submits,
	// run imports, experiments created and submitted, idempotency records,
	// across a few Lab sessions, half of them carrying request ids.
	WorkloadMixedLab = iota
	// WorkloadEveryType draws from every registered event type, including
	// the terminal, steps and system events, and ids that are not valid
	// path components.
	WorkloadEveryType
)

// Workload yields n deterministic events of the given kind from seed. Each
// has its id and ts set (ts advances 1–3 ms per event from 2026-02-06), so
// the same arguments give the same events; Seq is left for the log.
func Workload(kind int, seed uint64, n int) iter.Seq[*events.Event] {
	return func(yield func(*events.Event) bool) {
		g := &gen{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ts: 1770379200000}
		for i := 0; i < n; i++ {
			var ev *events.Event
			if kind == WorkloadEveryType {
				ev = g.anyEvent()
			} else {
				ev = g.labEvent()
			}
			g.ts += int64(1 + g.rng.IntN(3))
			ev.TS = g.ts
			g.n++
			ev.ID = fmt.Sprintf("0194d5e0-0000-7000-8000-%012x", g.n)
			if !yield(ev) {
				return
			}
		}
	}
}

type gen struct {
	seed   uint64
	rng    *rand.Rand
	ts     int64
	n      int
	runs   int
	exps   int
	fbs    int
	blocks int
	spool  map[string]int64
}

func (g *gen) session() string { return fmt.Sprintf("lab_s%d", g.rng.IntN(4)) }

func (g *gen) intp(max int) *int { v := g.rng.IntN(max + 1); return &v }

func (g *gen) req(ev *events.Event, resp any) *events.Event {
	if g.rng.IntN(2) == 0 {
		return ev
	}
	b, _ := json.Marshal(resp)
	return ev.WithRequest(fmt.Sprintf("req-%d", g.n), fmt.Sprintf("sha256-%064x", g.n), b)
}

func (g *gen) feedback(sess string) events.FeedbackEntry {
	g.fbs++
	e := events.FeedbackEntry{
		SchemaVersion: 1, ID: fmt.Sprintf("fb_%d_%d", g.seed, g.fbs), SessionID: sess,
		RunID:   fmt.Sprintf("run_%d", g.rng.IntN(g.runs+1)),
		Ratings: &events.Ratings{Overall: g.intp(100), Hook: g.intp(100), Pacing: g.intp(100), Sync: g.intp(100)},
		Notes:   []string{"", "good pacing", "captions drift <late> & \"quoted\"", "ünïcödé ✓"}[g.rng.IntN(4)],
	}
	if g.rng.IntN(3) == 0 {
		e.Tags = []string{"hook", "a/b"}
	}
	if g.rng.IntN(4) == 0 {
		e.CreatedAt = "2026-02-01T00:00:00.000Z"
	}
	return e
}

func (g *gen) experiment(sess string) events.LabExperiment {
	g.exps++
	return events.LabExperiment{
		SchemaVersion: 1, ExperimentID: fmt.Sprintf("exp_%d", g.exps), SessionID: sess,
		Name: "hook test", Hypothesis: "a shorter hook keeps viewers", Topic: "cats",
		BaselineRunID: "run_1", Status: "queued",
		Variants:  []events.Variant{{VariantID: "v_a", Label: "A", RunID: "run_1"}, {VariantID: "v_b", Label: "B", RunID: "run_2"}},
		Questions: []events.Question{{ID: "q1", Prompt: "Was B better?", Type: "yes_no_unsure"}},
	}
}

func (g *gen) labEvent() *events.Event {
	sess := g.session()
	switch k := g.rng.IntN(20); {
	case k < 11:
		e := g.feedback(sess)
		return g.req(events.MustNew(sess, &events.FeedbackSubmitted{Entry: e}), map[string]string{"feedbackId": e.ID})
	case k < 14:
		g.runs++
		run := events.LabRun{SchemaVersion: 1, RunID: fmt.Sprintf("run_%d", g.runs), SessionID: sess,
			ArtifactsDir: "/data/out/" + fmt.Sprint(g.runs), ArtifactsDirRealpath: "/data/out/" + fmt.Sprint(g.runs),
			Fingerprint: &events.RunFingerprint{Video: &events.FileStat{Path: "video.mp4", SizeBytes: int64(g.rng.IntN(1 << 24)), MtimeMs: g.ts}},
			VideoPath:   "/data/out/video.mp4", AutoMetricsSummary: &events.AutoMetricsSummary{SyncRating: g.intp(100)}}
		return g.req(events.MustNew(sess, &events.RunImported{Run: run}), map[string]string{"runId": run.RunID})
	case k < 16:
		x := g.experiment(sess)
		return g.req(events.MustNew(sess, &events.ExperimentCreated{Experiment: x}), map[string]string{"experimentId": x.ExperimentID})
	case k < 18:
		x := g.experiment(sess)
		x.Status, x.Winner, x.Answers = "done", &events.Winner{VariantID: "v_b", Reason: "faster"}, json.RawMessage(`{"q1":"yes"}`)
		fb := []events.FeedbackEntry{g.feedback(sess), g.feedback(sess)}
		return g.req(events.MustNew(sess, &events.ExperimentSubmitted{Experiment: x, Feedback: fb}),
			map[string]any{"experimentId": x.ExperimentID, "feedbackIds": []string{fb[0].ID, fb[1].ID}})
	case k < 19:
		x := g.experiment(sess)
		x.Status = "running"
		return events.MustNew(sess, &events.ExperimentUpdated{Experiment: x})
	default:
		ev := events.MustNew(sess, &events.IdempotencyRecorded{Kind: "import", EntityID: fmt.Sprintf("run_%d", g.runs)})
		return ev.WithRequest(fmt.Sprintf("req-%d", g.n), "sha256-00", json.RawMessage(`{"runId":"run_1"}`))
	}
}

func (g *gen) anyEvent() *events.Event {
	if g.spool == nil {
		g.spool = map[string]int64{}
	}
	conv := []string{"conv_a", "conv_b", "../escape", "conv b"}[g.rng.IntN(4)]
	mandate := fmt.Sprintf("m_%d", g.rng.IntN(3))
	step := fmt.Sprintf("s%d", g.rng.IntN(4))
	code := g.intp(2)
	switch g.rng.IntN(26) {
	case 0:
		sess := g.session()
		return events.MustNew(sess, &events.LabSessionStarted{SessionID: sess, Version: "test", Pid: 42})
	case 1:
		return events.MustNew("feedback", &events.FeedbackIngested{Raw: []byte(`{"id":"legacy","note":"from cm"}`), Offset: -1})
	case 2:
		return events.MustNew("lab_bad/../../x", &events.FeedbackSubmitted{Entry: g.feedback("lab_bad")})
	case 3:
		ev := events.MustNew(mandate, &events.StepExecuting{MandateID: mandate, StepID: step, IdemKey: "k", ObservedPreHash: "sha256-aa"})
		return ev.WithRequest(fmt.Sprintf("req-%d", g.n), "sha256-01", json.RawMessage(`{"ok":true}`))
	case 4:
		return events.MustNew(mandate, &events.StepPlanned{MandateID: mandate, Steps: []events.PlannedStep{
			{StepID: "s0", Tool: "sh", ParamsHash: "sha256-p0", IdemKey: "k0", World: []string{"out"}},
			{StepID: "s1", Tool: "sh", ParamsHash: "sha256-p1", IdemKey: "k1"}}})
	case 5:
		return events.MustNew(mandate, &events.StepCompleted{MandateID: mandate, StepID: step, PostHash: "sha256-b", ResultHash: "sha256-c", ExitCode: code})
	case 6:
		return events.MustNew(mandate, &events.StepFailed{MandateID: mandate, StepID: step, ErrorClass: "exit", ErrorMsg: "exit status 1", ExitCode: code})
	case 7:
		return events.MustNew(mandate, &events.StepNeedsReview{MandateID: mandate, StepID: step, Reason: "pre_hash_mismatch", Evidence: &events.Evidence{Reason: "pre_hash_mismatch"}})
	case 8:
		if g.n%2 == 0 { // the parity of n takes nothing from the rng
			return events.MustNew(mandate, &events.MandateCancelled{MandateID: mandate, Reason: "operator"})
		}
		return events.MustNew(mandate, &events.StepReset{MandateID: mandate, StepID: step, IdemKey: "k", Reason: "safe_to_retry"})
	case 9:
		return events.MustNew(conv, &events.PtySessionStarted{ConversationID: conv, ShellID: "sh_1", Pid: 7, Cols: 80, Rows: 24, Cwd: "/tmp"})
	case 10, 11:
		g.blocks++
		b := events.Block{BlockID: fmt.Sprintf("blk_%d", g.blocks), Seq: g.blocks, Mode: "block", Cmd: "ls", Cwd: "/", TsBegin: g.ts, Status: events.BlockRunning, SpoolBegin: g.spool[conv]}
		if g.rng.IntN(10) == 0 {
			b.BlockID = "../blk"
		}
		return events.MustNew(conv, &events.PtyBlockBegin{Block: b})
	case 12, 13, 14, 15:
		data := []byte(fmt.Sprintf("line %d\x1b[0m ✓\n", g.n))[:1+g.rng.IntN(12)]
		blk := ""
		if g.blocks > 0 && g.rng.IntN(3) > 0 {
			blk = fmt.Sprintf("blk_%d", g.blocks)
		}
		ev := events.MustNew(conv, &events.PtyOutput{BlockID: blk, SpoolOffset: g.spool[conv], Data: data})
		g.spool[conv] += int64(len(data))
		return ev
	case 16:
		b := events.Block{BlockID: fmt.Sprintf("blk_%d", g.blocks), Seq: g.blocks, Mode: "block", Cmd: "ls", Cwd: "/", TsBegin: g.ts - 5, TsEnd: g.ts, Status: events.BlockCompleted, ExitCode: code, SpoolEnd: g.spool[conv]}
		return events.MustNew(conv, &events.PtyBlockEnd{Block: b})
	case 17:
		if g.n%3 == 0 { // the parity of n takes nothing from the rng
			line := "[cmlab: output truncated at the block cap of 64 bytes; further output is dropped and counted]\n"
			ev := events.MustNew(conv, &events.PtyTruncated{BlockID: fmt.Sprintf("blk_%d", g.blocks), SpoolOffset: g.spool[conv],
				Line: line, Dropped: int64(g.n), Limit: 64, Scope: events.TruncatedBlock})
			g.spool[conv] += int64(len(line))
			return ev
		}
		line := fmt.Sprintf("__FWS_PROMPT__ ts=%d cwd_b64=Lw== exit=0\n", g.ts)
		ev := events.MustNew(conv, &events.PtyPrompt{PromptTS: g.ts, Cwd: "/", ExitCode: code, SpoolOffset: g.spool[conv], Line: line})
		g.spool[conv] += int64(len(line))
		return ev
	case 18:
		ev := events.MustNew(conv, &events.PtyInput{Data: []byte("7\r"), Source: "send"})
		return ev.WithRequest(fmt.Sprintf("req-%d", g.n), "sha256-02", json.RawMessage(`{"ok":true}`))
	case 19:
		return events.MustNew(conv, &events.PtySessionReset{OldShellID: "sh_1", NewShellID: "sh_2", Reason: "wedged"})
	case 20:
		return events.MustNew(conv, &events.PtySessionEnded{ShellID: "sh_2", Reason: "end_session", Exit: code})
	case 21:
		return events.MustNew("wal", &events.WalRepaired{Segment: "00000000000000000001", Offset: 10, Length: 3, Quarantine: "q1", Reason: "bad crc", FirstSeq: 9})
	case 22:
		return events.MustNew("recovery", &events.RecoveryApplied{Decisions: []events.RecoveryDecision{{MandateID: mandate, StepID: step, Verdict: "already_done", Action: "complete"}}})
	case 23:
		// The parity of n takes nothing from the rng: adoption's events
		// (a content-machine home's lines, engine/adopt.go) share the slot.
		switch g.n % 4 {
		case 1:
			return events.MustNew(events.AdoptStream, &events.RunAdopted{Offset: -1,
				Raw: []byte(fmt.Sprintf(`{"schemaVersion":1,"runId":"run_cm_%d","sessionId":"lab_cm","createdAt":"2026-02-06T10:00:00.000Z","topic":"Café ☕","artifactsDir":"/cm/a","artifactsDirRealpath":"/cm/a","fingerprint":{"video":{"path":"/cm/a/video.mp4","sizeBytes":16,"mtimeMs":1700000000123.4568}}}`, g.n))})
		case 2:
			return events.MustNew(events.AdoptStream, &events.ExperimentAdopted{Offset: -1,
				Raw: []byte(fmt.Sprintf(`{"schemaVersion":1,"experimentId":"exp_cm_%d","sessionId":"lab_cm","createdAt":"2026-02-06T11:00:00.000Z","name":"cm","baselineRunId":"run_cm_1","variants":[],"status":"queued"}`, g.n))})
		case 3:
			sess := []string{"lab_cm", "lab_s0", "../x"}[g.n%3]
			return events.MustNew(events.AdoptStream, &events.SessionAdopted{Session: sess, File: "idempotency.jsonl", Offset: -1,
				Raw: []byte(`{"schemaVersion":1,"requestId":"r","type":"feedback","response":{"feedbackId":"x"},"createdAt":"2026-02-06T10:05:00.000Z"}`)})
		}
		return events.MustNew("wal", &events.WalSalvaged{LostSeq: 3, Segment: "x", Reason: "bad crc"})
	default:
		return g.labEvent()
	}
}

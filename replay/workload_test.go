package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// workload returns n events of a random but reproducible Lab + terminal +
// steps workload, with ids and timestamps fixed so the same list can be
// appended to several homes.
func workload(t *testing.T, seed uint64, n int) []*events.Event {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	base := time.Date(2026, 2, 6, 12, 0, 0, 0, time.UTC).UnixMilli()
	var out []*events.Event
	var spool int64
	var exps []string
	add := func(stream string, p events.Payload) *events.Event {
		ev := events.MustNew(stream, p)
		ev.ID = fmt.Sprintf("0190c0de-0000-7000-8000-%012d", len(out)+1)
		ev.TS = base + int64(len(out))*1000
		out = append(out, ev)
		return ev
	}
	add("lab_s1", &events.LabSessionStarted{SessionID: "lab_s1", Version: "test", Pid: 42})
	for len(out) < n {
		i := len(out)
		switch r.IntN(7) {
		case 0:
			add("lab_s1", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: fmt.Sprintf("run_%d", i),
				SessionID: "lab_s1", ArtifactsDir: fmt.Sprintf("output/r%d", i), ArtifactsDirRealpath: fmt.Sprintf("/x/output/r%d", i)}})
		case 1:
			ov := r.IntN(101)
			add("lab_s1", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%d", i),
				SessionID: "lab_s1", RunID: "run_1", Ratings: &events.Ratings{Overall: &ov}, Notes: "ok"}}).
				WithRequest(fmt.Sprintf("req-%d", i), "h", json.RawMessage(fmt.Sprintf(`{"feedbackId":"fb_%d"}`, i)))
		case 2:
			id := fmt.Sprintf("exp_%d", i)
			exps = append(exps, id)
			add("lab_s1", &events.ExperimentCreated{Experiment: events.LabExperiment{SchemaVersion: 1, ExperimentID: id,
				SessionID: "lab_s1", Name: "e", Status: "queued", Variants: []events.Variant{{VariantID: "v1", Label: "A", RunID: "run_1"}}, Questions: []events.Question{}}})
		case 3:
			data := []byte(fmt.Sprintf("line %d\n", i))
			add("conv1", &events.PtyOutput{SpoolOffset: spool, Data: data})
			spool += int64(len(data))
		case 4:
			if len(exps) > 0 {
				add("lab_s1", &events.ExperimentUpdated{Experiment: events.LabExperiment{SchemaVersion: 1, ExperimentID: exps[r.IntN(len(exps))],
					SessionID: "lab_s1", Status: "running", Variants: []events.Variant{}, Questions: []events.Question{}}})
			}
		case 5:
			add("m1", &events.StepExecuting{MandateID: "m1", StepID: fmt.Sprintf("s%d", i), IdemKey: "k", ObservedPreHash: "sha256-00"})
		case 6:
			add("lab_s1", &events.IdempotencyRecorded{Kind: "import", EntityID: "run_1"}).
				WithRequest(fmt.Sprintf("req-%d", i), "h", json.RawMessage(`{"runId":"run_1"}`))
		}
	}
	return out[:n]
}

// cloneEvents copies events so an append (which sets Seq) cannot alias.
func cloneEvents(evs []*events.Event) []*events.Event {
	out := make([]*events.Event, len(evs))
	for i, ev := range evs {
		c := *ev
		c.Seq = 0
		out[i] = &c
	}
	return out
}

// liveHome appends evs to a new home through the engine, one append per
// event, with an extra projector fed by the engine's observer hook, and
// closes it. Without fsync: what is under test is the bytes, not durability.
func liveHome(t *testing.T, dir string, evs []*events.Event, extra ProjectorFactory) home.Home {
	t.Helper()
	ctx := context.Background()
	h := home.Home{Dir: dir}
	eng, err := engine.Open(ctx, engine.Options{Home: h, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var obsErr error
	if extra != nil {
		p, err := extra(h)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := eng.Subscribe(engine.ObserverFunc(func(ev *events.Event) {
			if err := p.Apply([]*events.Event{ev}); err != nil && obsErr == nil {
				obsErr = err
			}
		})); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range cloneEvents(evs) {
		if _, err := eng.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if obsErr != nil {
		t.Fatal(obsErr)
	}
	return h
}

// snapshot reads every view file of h.
func snapshot(t *testing.T, h home.Home) map[string]string {
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

// lineProjector is a test projector with its own simple views beside the
// production ones: one line per event in lab/testviews/trace.jsonl, and terminal
// output in lab/testviews/<stream>.spool.
// With bugSeq set it writes a wrong byte at bugPos of that event's line.
type lineProjector struct {
	h      home.Home
	bugSeq uint64
	bugPos int
}

func (p *lineProjector) Apply(evs []*events.Event) error {
	for _, ev := range evs {
		line := fmt.Sprintf(`{"seq":%d,"type":%q,"stream":%q,"ts":%d}`+"\n", ev.Seq, ev.Type, ev.Stream, ev.TS)
		if ev.Seq == p.bugSeq {
			b := []byte(line)
			b[p.bugPos] ^= 0x20
			line = string(b)
		}
		if err := appendFile(filepath.Join(p.h.Dir, "lab", "testviews", "trace.jsonl"), []byte(line)); err != nil {
			return err
		}
		if ev.Type == events.TypePtyOutput {
			o, err := events.DecodeAs[*events.PtyOutput](ev)
			if err != nil {
				return err
			}
			if err := appendFile(filepath.Join(p.h.Dir, "lab", "testviews", ev.Stream+".spool"), o.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *lineProjector) Close() error { return nil }

func appendFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func lineFactory(bugSeq uint64, bugPos int) ProjectorFactory {
	return func(h home.Home) (Projector, error) { return &lineProjector{h: h, bugSeq: bugSeq, bugPos: bugPos}, nil }
}

// bothProjectors runs the production projector and the line projector.
type bothProjectors []Projector

func (b bothProjectors) Apply(evs []*events.Event) error {
	for _, p := range b {
		if err := p.Apply(evs); err != nil {
			return err
		}
	}
	return nil
}

func (b bothProjectors) Close() error {
	var first error
	for _, p := range b {
		if err := p.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func withLines(h home.Home) (Projector, error) { return withBuggyLines(0, 0)(h) }

// withBuggyLines is the production projector plus a line projector that
// gets event bugSeq wrong.
func withBuggyLines(bugSeq uint64, bugPos int) ProjectorFactory {
	return func(h home.Home) (Projector, error) {
		p, err := DefaultProjector(h)
		if err != nil {
			return nil, err
		}
		return bothProjectors{p, &lineProjector{h: h, bugSeq: bugSeq, bugPos: bugPos}}, nil
	}
}

package steps

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/faultfs"
	"github.com/cmlab/cmlab/snapshot"
)

// stepHistory is every kind of step event, with the fields a snapshot
// must keep (spec, world, exit codes, evidence, process, last auto
// decision, cancellation, orphans), and filler events between them.
func stepHistory() []events.Payload {
	code, two := 0, 2
	ev := &events.Evidence{Reason: "r", Pid: 7, Detail: "d"}
	return []events.Payload{
		&events.StepPlanned{MandateID: "m1", Name: "n", Spec: []byte(`{"steps":[]}`), Steps: []events.PlannedStep{
			{StepID: "a", Tool: "sh", ParamsHash: h('9'), PreHash: h('1'), ExpectedPostHash: h('2'), IdemKey: "k1", World: []string{"x", "y"}, Dir: "/tmp"},
			{StepID: "b", Tool: "sh", ParamsHash: h('8'), IdemKey: "k2"},
		}},
		&events.LabSessionStarted{SessionID: "lab_1", Version: "t"},
		&events.StepExecuting{MandateID: "m1", StepID: "a", IdemKey: "k1", ObservedPreHash: h('4'), Pid: 42, PidStart: 9, BootID: "boot", RunnerPid: 41, RunnerStart: 8},
		&events.StepCompleted{MandateID: "m1", StepID: "a", PostHash: h('2'), ResultHash: h('5'), ExitCode: &code, OutputDigest: h('6'), Evidence: ev},
		&events.StepFailed{MandateID: "m1", StepID: "b", ErrorClass: "exit_status", ErrorMsg: "boom", ExitCode: &two},
		&events.RecoveryApplied{Auto: true, Decisions: []events.RecoveryDecision{{MandateID: "m1", Action: "wait", Reason: "outside_lookback", Evidence: ev}}},
		&events.StepNeedsReview{MandateID: "m1", StepID: "b", Reason: "operator", Evidence: ev},
		&events.StepPlanned{MandateID: "m2", Steps: []events.PlannedStep{{StepID: "s", Tool: "t", ParamsHash: h('7'), IdemKey: "k3"}}},
		&events.MandateCancelled{MandateID: "m2", Reason: "stop"},
		&events.StepExecuting{MandateID: "ghost", StepID: "g", ObservedPreHash: h('3')},
		&events.LabSessionStarted{SessionID: "lab_2", Version: "t"},
		&events.StepReset{MandateID: "m1", StepID: "b", IdemKey: "k2", Reason: "retry"},
		&events.LabSessionStarted{SessionID: "lab_3", Version: "t"},
	}
}

func openEngine(t *testing.T, hm home.Home) *engine.Engine {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: hm, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func appendAll(t *testing.T, eng *engine.Engine, ps []events.Payload) {
	t.Helper()
	for _, p := range ps {
		mid, _ := StepTarget(p)
		if mid == "" {
			mid = "lab"
		}
		if _, err := eng.Append(context.Background(), events.MustNew(mid, p)); err != nil {
			t.Fatal(err)
		}
	}
}

// replayState is the step state of the whole log, no snapshot.
func replayState(t *testing.T, eng *engine.Engine) *State {
	t.Helper()
	s := NewState()
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		s.Observe(ev)
	}
	return s
}

func sameState(t *testing.T, got, want *State) {
	t.Helper()
	g, w := got.Mandates(), want.Mandates()
	if !reflect.DeepEqual(g, w) {
		for i := range min(len(g), len(w)) {
			if !reflect.DeepEqual(g[i], w[i]) {
				t.Fatalf("mandate %d differs:\n got %+v\nwant %+v", i, g[i], w[i])
			}
		}
		t.Fatalf("%d mandates, want %d", len(g), len(w))
	}
	if got.LastSeq() != want.LastSeq() || got.Covered() != want.Covered() || got.errs != want.errs {
		t.Fatalf("last step seq %d covered %d errs %d, want %d %d %d", got.LastSeq(), got.Covered(), got.errs, want.LastSeq(), want.Covered(), want.errs)
	}
}

// TestJournalSnapshot: a journal's state is written at close and loaded
// by the next journal, which applies only the log after it; the result
// equals a replay of the whole log, spec and every field included.
func TestJournalSnapshot(t *testing.T) {
	hm := home.Home{Dir: filepath.Join(t.TempDir(), "h")}
	ps := stepHistory()
	eng := openEngine(t, hm)
	if _, err := NewJournal(eng); err != nil {
		t.Fatal(err)
	}
	appendAll(t, eng, ps[:9])
	if err := eng.Close(); err != nil { // final checkpoint: the snapshot
		t.Fatal(err)
	}
	hd, _, err := snapshot.Read(SnapshotFile(hm), SnapshotModel, SnapshotVersion())
	if err != nil || hd.Seq != 9 {
		t.Fatalf("snapshot after close: %+v %v", hd, err)
	}
	eng = openEngine(t, hm)
	appendAll(t, eng, ps[9:]) // no journal: the log runs past the snapshot
	eng.Close()

	eng = openEngine(t, hm)
	defer eng.Close()
	j, err := NewJournal(eng)
	if err != nil {
		t.Fatal(err)
	}
	if j.SnapshotRefused() != "" || j.State().loaded != 9 {
		t.Fatalf("snapshot not used: loaded %d, refused %q", j.State().loaded, j.SnapshotRefused())
	}
	want := replayState(t, eng)
	sameState(t, j.State(), want)
	if m := j.State().Mandate("m1"); string(m.Spec) != `{"steps":[]}` || m.LastAuto == nil || m.Step("b").Status != events.StatusPending {
		t.Fatalf("m1 = %+v", m)
	}
	// Still a live observer: a transition after the load is applied.
	if err := j.Record(context.Background(), &events.StepExecuting{MandateID: "m1", StepID: "b", ObservedPreHash: h('1')}); err != nil {
		t.Fatal(err)
	}
	if st := j.State().Mandate("m1").Step("b"); st.Status != events.StatusExecuting {
		t.Fatalf("b = %+v", st)
	}
	sameState(t, j.State(), replayState(t, eng))
}

// TestJournalSnapshotRefused: a snapshot that is truncated, garbled, of
// another version or another log is never trusted: the state is rebuilt
// from the whole log and the journal says why.
func TestJournalSnapshotRefused(t *testing.T) {
	for name, damage := range map[string]func(path string){
		"truncated": func(path string) { fi, _ := os.Stat(path); os.Truncate(path, fi.Size()-3) },
		"garbled": func(path string) {
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 0x5a
			os.WriteFile(path, b, 0o600)
		},
		"other version": func(path string) {
			hd, body, _ := snapshot.Read(path, SnapshotModel, SnapshotVersion())
			hd.Version = "0/old"
			snapshot.Write(path, hd, body)
		},
		"another event": func(path string) {
			hd, body, _ := snapshot.Read(path, SnapshotModel, SnapshotVersion())
			hd.EventID = "01a20000-0000-7000-8000-000000000000"
			snapshot.Write(path, hd, body)
		},
		"body not a state": func(path string) {
			hd, _, _ := snapshot.Read(path, SnapshotModel, SnapshotVersion())
			snapshot.Write(path, hd, []byte{0x81, 0xa8, 'm', 'a', 'n', 'd', 'a', 't', 'e', 's', 0x91, 0xc0})
		},
	} {
		t.Run(name, func(t *testing.T) {
			hm := home.Home{Dir: filepath.Join(t.TempDir(), "h")}
			eng := openEngine(t, hm)
			NewJournal(eng)
			appendAll(t, eng, stepHistory())
			eng.Close()
			damage(SnapshotFile(hm))
			eng = openEngine(t, hm)
			defer eng.Close()
			j, err := NewJournal(eng)
			if err != nil {
				t.Fatal(err)
			}
			if j.SnapshotRefused() == "" || j.State().loaded != 0 {
				t.Fatalf("untrusted snapshot used (loaded %d)", j.State().loaded)
			}
			sameState(t, j.State(), replayState(t, eng))
		})
	}
}

// TestStepSnapshotWriteFailureKeepsOld: a snapshot write that fails (a
// full disk) leaves the old file whole; the next checkpoint retries.
func TestStepSnapshotWriteFailureKeepsOld(t *testing.T) {
	hm := home.Home{Dir: filepath.Join(t.TempDir(), "h")}
	var fail atomic.Bool
	full := errorString("no space left on device")
	fsys := faultfs.New(func(stage, path string) error {
		if fail.Load() && stage == faultfs.StageWrite {
			return full
		}
		return nil
	})
	eng, err := engine.Open(context.Background(), engine.Options{Home: hm, NoSync: true, CheckpointInterval: time.Hour, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	j, _ := NewJournal(eng)
	ps := stepHistory()
	appendAll(t, eng, ps[:4])
	if ok, err := j.State().WriteSnapshot(SnapshotFile(hm), 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	old, _ := os.ReadFile(SnapshotFile(hm))
	fail.Store(true)
	appendAll(t, eng, ps[4:])
	if err := eng.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	j.snapshotHook(true)
	if j.SnapshotErr() == nil {
		t.Fatal("failed write not reported")
	}
	if now, _ := os.ReadFile(SnapshotFile(hm)); string(now) != string(old) {
		t.Fatal("old snapshot changed by a failed write")
	}
	if left, _ := filepath.Glob(SnapshotFile(hm) + ".tmp-*"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	fail.Store(false)
	j.snapshotHook(true)
	hd, _, err := snapshot.Read(SnapshotFile(hm), SnapshotModel, SnapshotVersion())
	if j.SnapshotErr() != nil || err != nil || hd.Seq != eng.Log().LastSeq() {
		t.Fatalf("retry: %v %v seq %d", j.SnapshotErr(), err, hd.Seq)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

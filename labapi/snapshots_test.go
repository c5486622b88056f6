package labapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/cmlab/cmlab/internal/faultfs"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/steps"
)

const (
	envSnapHome  = "CMLAB_TEST_SNAP_HOME"
	envSnapStage = "CMLAB_TEST_SNAP_STAGE"
	envSnapModel = "CMLAB_TEST_SNAP_MODEL"
)

func sha(c byte) string { return "sha256-" + strings.Repeat(string(c), 64) }

// appendReadModelHistory appends round i of a history every read model
// sees: a mandate (one step completed, one in review), a terminal block
// (left open every third round), a Lab session.
func appendReadModelHistory(t testing.TB, eng *engine.Engine, i int) {
	ctx := context.Background()
	m := fmt.Sprintf("m%d", i)
	blk := fmt.Sprintf("blk_%d", i)
	ps := []struct {
		stream string
		p      events.Payload
	}{
		{m, &events.StepPlanned{MandateID: m, Steps: []events.PlannedStep{
			{StepID: "a", Tool: "sh", ParamsHash: sha('1'), IdemKey: m + "a"}, {StepID: "b", Tool: "sh", ParamsHash: sha('2'), IdemKey: m + "b"}}}},
		{m, &events.StepExecuting{MandateID: m, StepID: "a", ObservedPreHash: sha('3')}},
		{m, &events.StepCompleted{MandateID: m, StepID: "a", PostHash: sha('4'), ResultHash: sha('5')}},
		{m, &events.StepNeedsReview{MandateID: m, StepID: "b", Reason: "operator"}},
		{"conv", &events.PtyBlockBegin{Block: events.Block{BlockID: blk, Cmd: "make " + blk, Mode: "block", Status: "running"}}},
		{"lab_" + m, &events.LabSessionStarted{SessionID: "lab_" + m, Version: "t"}},
	}
	if i%3 != 0 {
		ps = append(ps, struct {
			stream string
			p      events.Payload
		}{"conv", &events.PtyBlockEnd{Block: events.Block{BlockID: blk, Status: "done"}}})
	}
	for _, x := range ps {
		if _, err := eng.Append(ctx, events.MustNew(x.stream, x.p)); err != nil {
			t.Fatal(err)
		}
	}
}

// openServer opens h with a server (every read model subscribed); logs go
// to buf when set.
func openServer(t testing.TB, h home.Home, buf *bytes.Buffer) (*Server, *engine.Engine) {
	return openServerWith(t, engine.Options{Home: h}, buf)
}

// openServerWith is openServer with the engine's options eo.
func openServerWith(t testing.TB, eo engine.Options, buf *bytes.Buffer) (*Server, *engine.Engine) {
	eng, err := engine.Open(context.Background(), eo)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if buf != nil {
		log = slog.New(slog.NewTextHandler(buf, nil))
	}
	srv, err := New(withReadModels(t, Options{Engine: eng, Listen: "127.0.0.1:0", SessionID: "lab_t", Version: "test", Logger: log}))
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	return srv, eng
}

// TestHelperSnapshotWriter is the child of TestReadModelSnapshotsSIGKILL:
// it closes a home once (every snapshot written), reopens it, appends
// more, and closes again with a fault hook that blocks the chosen model's
// snapshot write at the chosen stage, after saying so in a marker file,
// until the parent kills it.
func TestHelperSnapshotWriter(t *testing.T) {
	dir := crashchild.Role(t, envSnapHome, "TestReadModelSnapshotsSIGKILL")
	h := home.Home{Dir: dir}
	srv, eng := openServer(t, h, nil)
	for i := range 5 {
		appendReadModelHistory(t, eng, i)
	}
	srv.Close()
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	stage, model := os.Getenv(envSnapStage), os.Getenv(envSnapModel)
	block := faultfs.New(func(st, path string) error {
		if st == stage && filepath.Base(path) == model+".msgpack" {
			os.WriteFile(filepath.Join(dir, "in-snapshot"), []byte(st), 0o600)
			select {} // killed here
		}
		return nil
	})
	srv, eng = openServerWith(t, engine.Options{Home: h, FS: block}, nil)
	for i := 5; i < 9; i++ {
		appendReadModelHistory(t, eng, i)
	}
	srv.Close()
	eng.Close()
	fmt.Fprintln(os.Stderr, "the blocked snapshot write was never reached")
	os.Exit(3)
}

// TestReadModelSnapshotsSIGKILL: a daemon killed (SIGKILL, a real child
// process) in the middle of writing a read model's snapshot — before the
// temporary file is written, once it is whole but not renamed, once
// renamed but before the directory's fsync — restarts with every read
// model equal to a replay of the whole log, and no temporary file left.
func TestReadModelSnapshotsSIGKILL(t *testing.T) {
	for _, model := range []string{steps.SnapshotModel, retention.ModelName} {
		for _, stage := range []string{faultfs.StageWrite, faultfs.StageRename, faultfs.StageDirSync} {
			t.Run(model+"/"+stage, func(t *testing.T) {
				h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
				child := crashchild.Start(t, "TestHelperSnapshotWriter", envSnapHome+"="+h.Dir, envSnapStage+"="+stage, envSnapModel+"="+model)
				marker := filepath.Join(h.Dir, "in-snapshot")
				child.AwaitFile(t, marker, 60*time.Second)
				child.Kill(t)
				os.Remove(marker)
				path := filepath.Join(h.StateDir(), "snapshots", model+".msgpack")
				if stage == faultfs.StageRename || stage == faultfs.StageDirSync {
					// Killed with a temporary file or just after the rename.
					left, _ := filepath.Glob(path + ".tmp-*")
					if (len(left) == 0) != (stage == faultfs.StageDirSync) {
						t.Fatalf("stage %s: temporary files %v", stage, left)
					}
				}
				var logs bytes.Buffer
				srv, eng := openServer(t, h, &logs)
				defer eng.Close()
				defer srv.Close()
				if left, _ := filepath.Glob(filepath.Join(h.StateDir(), "snapshots", "*.tmp-*")); len(left) != 0 {
					t.Fatalf("temporary files left after restart: %v", left)
				}
				if strings.Contains(logs.String(), "snapshot ignored") {
					t.Fatalf("a snapshot was refused after the kill: %s", logs.String())
				}
				checkReadModels(t, srv, eng)
				if got := strings.Join(srv.opts.Retention.AwaitingReview(), " "); got != "m0/b m1/b m2/b m3/b m4/b m5/b m6/b m7/b m8/b" {
					t.Fatalf("awaiting review: %q", got)
				}
			})
		}
	}
}

// checkReadModels compares every read model of srv with a replay of the
// whole log.
func checkReadModels(t *testing.T, srv *Server, eng *engine.Engine) {
	t.Helper()
	sameLabState(t, srv, fullReplay(t, eng))
	st := steps.NewState()
	ret := retention.New()
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		st.Observe(ev)
		ret.Observe(ev)
	}
	if got, want := srv.opts.Journal.State().Mandates(), st.Mandates(); !reflect.DeepEqual(got, want) {
		t.Fatalf("step state differs from a replay:\n got %+v\nwant %+v", got, want)
	}
	m := srv.opts.Retention
	if !reflect.DeepEqual(m.AwaitingReview(), ret.AwaitingReview()) || !reflect.DeepEqual(m.OpenBlocks(), ret.OpenBlocks()) ||
		m.OldestOpenStep() != ret.OldestOpenStep() || m.OldestOpenBlock() != ret.OldestOpenBlock() || m.Covered() != ret.Covered() {
		t.Fatalf("retention model differs from a replay: %v %v / %v %v", m.AwaitingReview(), m.OpenBlocks(), ret.AwaitingReview(), ret.OpenBlocks())
	}
}

// TestReadModelSnapshotsRestart: a clean restart loads every model's
// snapshot (none is rebuilt) and equals a replay.
func TestReadModelSnapshotsRestart(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	srv, eng := openServer(t, h, nil)
	for i := range 4 {
		appendReadModelHistory(t, eng, i)
	}
	srv.Close()
	eng.Close()
	var logs bytes.Buffer
	srv, eng = openServer(t, h, &logs)
	defer eng.Close()
	defer srv.Close()
	last := eng.Log().LastSeq()
	if srv.opts.Journal.State().Covered() != last || srv.opts.Retention.Covered() != last || logs.Len() != 0 {
		t.Fatalf("covered %d/%d of %d; logs %s", srv.opts.Journal.State().Covered(), srv.opts.Retention.Covered(), last, logs.String())
	}
	if rebuilt := srv.lab.Rebuilt(); rebuilt != "" || srv.lab.DurableCovered() != last {
		t.Fatalf("Lab store rebuilt (%q) or covers %d of %d after a clean restart", rebuilt, srv.lab.DurableCovered(), last)
	}
	for _, f := range []string{steps.SnapshotFile(h), retention.SnapshotFile(h)} {
		if hd, _, err := snapshot.Read(f, filepath.Base(strings.TrimSuffix(f, ".msgpack")), map[string]string{
			steps.SnapshotModel: steps.SnapshotVersion(), retention.ModelName: retention.Version()}[filepath.Base(strings.TrimSuffix(f, ".msgpack"))]); err != nil || hd.Seq != last {
			t.Fatalf("%s: %+v %v", f, hd, err)
		}
	}
	checkReadModels(t, srv, eng)
}

// TestRetentionSnapshotWriteFailure: a snapshot write that fails (a full
// disk) keeps the old file, is logged, and is retried at the next
// checkpoint.
func TestRetentionSnapshotWriteFailure(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	srv, eng := openServer(t, h, nil)
	appendReadModelHistory(t, eng, 0)
	srv.Close()
	eng.Close()
	path := retention.SnapshotFile(h)
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	// Only the test's own checkpoints: one the engine took by itself
	// (every second, or every 1,000 events) while the last events were
	// appended would leave the one below fewer than SnapshotEvery events
	// to cover, and it would rightly not write (a slow race run did that).
	var full atomic.Bool
	full.Store(true)
	fsys := faultfs.New(func(stage, p string) error {
		if full.Load() && stage == faultfs.StageWrite && p == path {
			return syscall.ENOSPC
		}
		return nil
	})
	srv, eng = openServerWith(t, engine.Options{Home: h, CheckpointEvery: 1 << 30, CheckpointInterval: time.Hour, FS: fsys}, &logs)
	defer eng.Close()
	defer srv.Close()
	for i := 1; eng.Log().LastSeq() < retention.SnapshotEvery+20; i++ {
		appendReadModelHistory(t, eng, i)
	}
	if err := eng.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "retention model snapshot not written") || !strings.Contains(logs.String(), "no space left") {
		t.Fatalf("failure not logged: %s", logs.String())
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Fatal("the old snapshot changed")
	}
	full.Store(false)
	appendReadModelHistory(t, eng, 100000)
	if err := eng.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	hd, _, err := snapshot.Read(path, retention.ModelName, retention.Version())
	if err != nil || hd.Seq != eng.Log().LastSeq() {
		t.Fatalf("not retried at the next checkpoint: %+v %v (last %d)", hd, err, eng.Log().LastSeq())
	}
}

// TestReadModelSnapshotsRefusedAreLogged: a garbled step-state snapshot
// and a truncated retention snapshot are not trusted: the daemon logs
// each and rebuilds the model from the log.
func TestReadModelSnapshotsRefusedAreLogged(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	srv, eng := openServer(t, h, nil)
	for i := range 3 {
		appendReadModelHistory(t, eng, i)
	}
	srv.Close()
	eng.Close()
	b, err := os.ReadFile(steps.SnapshotFile(h))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	os.WriteFile(steps.SnapshotFile(h), b, 0o600)
	fi, _ := os.Stat(retention.SnapshotFile(h))
	os.Truncate(retention.SnapshotFile(h), fi.Size()-5)
	var logs bytes.Buffer
	srv, eng = openServer(t, h, &logs)
	defer eng.Close()
	defer srv.Close()
	for _, want := range []string{"step state snapshot ignored, rebuilt from the log", "retention model snapshot ignored, rebuilding from the log"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("not logged: %q in %s", want, logs.String())
		}
	}
	checkReadModels(t, srv, eng)
}

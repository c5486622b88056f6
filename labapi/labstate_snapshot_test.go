package labapi

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
)

// fullReplay is the lab state built from the whole log, no snapshot.
func fullReplay(t *testing.T, eng *engine.Engine) *labState {
	t.Helper()
	st := newLabState()
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		st.Observe(ev)
	}
	return st
}

func sameLabState(t *testing.T, got, want *labState) {
	t.Helper()
	if !reflect.DeepEqual(got.runList(), want.runList()) {
		t.Fatalf("runs differ:\n got %+v\nwant %+v", got.runList(), want.runList())
	}
	if !reflect.DeepEqual(got.experimentList(), want.experimentList()) {
		t.Fatalf("experiments differ:\n got %+v\nwant %+v", got.experimentList(), want.experimentList())
	}
	if !reflect.DeepEqual(got.byReal, want.byReal) || !reflect.DeepEqual(got.sessions, want.sessions) {
		t.Fatalf("indexes differ: %v %v / %v %v", got.byReal, got.sessions, want.byReal, want.sessions)
	}
	if got.seq != want.seq {
		t.Fatalf("covers seq %d, want %d", got.seq, want.seq)
	}
}

// labWithHistory makes runs and experiments, closes the engine (final
// snapshot) and appends one more lab event with no server (so the log
// runs past the snapshot).
func labWithHistory(t *testing.T) (home.Home, Options) {
	tl := newTestLab(t)
	runA := tl.importRun(tl.mkRun("a", map[string]string{"script.json": `{"a":1}`}))
	runB := tl.importRun(tl.mkRun("b", map[string]string{"script.json": `{"b":2}`}))
	for range 3 {
		r := tl.do("POST", "/api/experiments", `{"name":"s","hypothesis":"h","baselineRunId":"`+runA+`","variants":[{"label":"B","runId":"`+runB+`"}]}`)
		if r.status != 200 {
			t.Fatalf("experiment: %d %s", r.status, r.body)
		}
	}
	opts := tl.srv.opts
	tl.srv.Close()
	if err := tl.eng.Close(); err != nil {
		t.Fatal(err)
	}
	if _, body, err := snapshot.Read(LabSnapshotFile(tl.home), labSnapModel, labSnapVersion()); err != nil || len(body) == 0 {
		t.Fatalf("no lab snapshot after close: %v", err)
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: tl.home})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := events.New("lab_after", &events.LabSessionStarted{SessionID: "lab_after", Version: "test"})
	if _, err := eng.Append(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return tl.home, opts
}

// reopen builds a server on a fresh engine of h; logs go to buf.
func reopen(t *testing.T, h home.Home, opts Options, buf *bytes.Buffer) (*Server, *engine.Engine) {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	opts.Engine = eng
	opts.Journal, opts.Retention = nil, nil // the old engine's
	opts.Logger = slog.New(slog.NewTextHandler(buf, nil))
	srv, err := New(withReadModels(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, eng
}

// TestLabStateSnapshot: start = snapshot + the log after its seq, equal to
// a replay of the whole log.
func TestLabStateSnapshot(t *testing.T) {
	h, opts := labWithHistory(t)
	hdr, _, _ := snapshot.Read(LabSnapshotFile(h), labSnapModel, labSnapVersion())
	var logs bytes.Buffer
	srv, eng := reopen(t, h, opts, &logs)
	if srv.lab.snapSeq != hdr.Seq || hdr.Seq == 0 || hdr.Seq >= eng.Log().LastSeq() {
		t.Fatalf("snapshot seq %d, loaded %d, log last %d: the snapshot was not used", hdr.Seq, srv.lab.snapSeq, eng.Log().LastSeq())
	}
	if strings.Contains(logs.String(), "snapshot ignored") {
		t.Fatalf("sound snapshot ignored: %s", logs.String())
	}
	sameLabState(t, srv.lab, fullReplay(t, eng))
	if len(srv.lab.runList()) != 2 || len(srv.lab.experimentList()) != 3 {
		t.Fatalf("%d runs, %d experiments", len(srv.lab.runList()), len(srv.lab.experimentList()))
	}
	if _, ok := srv.lab.sessionStarted("lab_after"); !ok {
		t.Fatal("the event after the snapshot was not applied")
	}
}

// TestLabStateSnapshotRejected: a snapshot with a bad byte, of another
// code version, or covering seqs this log does not hold is ignored (and
// logged); the state is rebuilt from the log.
func TestLabStateSnapshotRejected(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string){
		"bit flipped": func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 0x10
			os.WriteFile(path, b, 0o600)
		},
		"truncated": func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()-7)
		},
		"other version": func(t *testing.T, path string) {
			h, body, err := snapshot.Read(path, labSnapModel, labSnapVersion())
			if err != nil {
				t.Fatal(err)
			}
			h.Version = "0/old"
			if err := snapshot.Write(path, h, body); err != nil {
				t.Fatal(err)
			}
		},
		"past the log": func(t *testing.T, path string) {
			h, body, _ := snapshot.Read(path, labSnapModel, labSnapVersion())
			h.Seq += 1000
			snapshot.Write(path, h, body)
		},
		"another event": func(t *testing.T, path string) {
			h, body, _ := snapshot.Read(path, labSnapModel, labSnapVersion())
			h.EventID = "01a20000-0000-7000-8000-000000000000"
			snapshot.Write(path, h, body)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, opts := labWithHistory(t)
			damage(t, LabSnapshotFile(h))
			var logs bytes.Buffer
			srv, eng := reopen(t, h, opts, &logs)
			if !strings.Contains(logs.String(), "lab state snapshot ignored") {
				t.Fatalf("no warning logged: %q", logs.String())
			}
			if srv.lab.snapSeq != 0 {
				t.Fatalf("rejected snapshot loaded (seq %d)", srv.lab.snapSeq)
			}
			sameLabState(t, srv.lab, fullReplay(t, eng))
		})
	}
}

package pty_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/snapshot"
)

// ptyWithHistory runs blocks in two conversations, closes (the final
// snapshot is written at the engine's close), then appends terminal
// events with no manager, so the log runs past the snapshot.
func ptyWithHistory(t *testing.T) home.Home {
	t.Helper()
	b := newBridge(t)
	b.execWait("seq 1 3000")
	b.execWait("echo two; false")
	b.conv = "conv2"
	b.execWait("printf 'x%.0s' $(seq 1 200)")
	b.close()
	if _, err := pty.SnapshotCovers(b.home); err != nil {
		t.Fatalf("no terminal snapshot after close: %v", err)
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: b.home})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// A block left open past the snapshot, with output: the next start
	// closes it from snapshot + tail alone.
	var size int64
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := decodeOutput(ev, "conv1"); ok {
			size = max(size, d)
		}
	}
	blk := events.Block{BlockID: "blk_after", Seq: 3, Mode: "block", Cmd: "late", Status: events.BlockRunning, SpoolBegin: size, OutputPath: "blocks/blk_after.out"}
	evs := []*events.Event{
		events.MustNew("conv1", &events.PtyBlockBegin{Block: blk}),
		events.MustNew("conv1", &events.PtyOutput{BlockID: "blk_after", SpoolOffset: size, Data: []byte("late output\n")}),
	}
	if _, err := eng.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	return b.home
}

// decodeOutput returns the spool end a pty.output or pty.prompt of conv reaches.
func decodeOutput(ev *events.Event, conv string) (int64, bool) {
	if ev.Stream != conv {
		return 0, false
	}
	switch ev.Type {
	case events.TypePtyOutput:
		d, _ := events.DecodeAs[*events.PtyOutput](ev)
		return d.SpoolOffset + int64(len(d.Data)), true
	case events.TypePtyPrompt:
		d, _ := events.DecodeAs[*events.PtyPrompt](ev)
		return d.SpoolOffset + int64(len(d.Line)), true
	}
	return 0, false
}

// reopenManager opens h with a manager whose log goes to logs.
func reopenManager(t *testing.T, h home.Home, logs *bytes.Buffer) *bridge {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	return openBridgeWith(t, h, eng, pty.Options{Dir: h.Dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
}

// checkSameAsReplay: the manager's model equals the one built from the
// whole log, and the views read through it are the files'.
func checkSameAsReplay(t *testing.T, b *bridge) {
	t.Helper()
	b.barrier()
	if got, want := b.mgr.ModelBytes(), pty.ReplayModelBytes(b.eng); !bytes.Equal(got, want) {
		t.Fatalf("model (%d bytes) differs from a replay of the whole log (%d bytes)", len(got), len(want))
	}
	for _, conv := range []string{"conv1", "conv2"} {
		b.conv = conv
		b.checkLifecycles()
	}
	b.conv = "conv1"
	w := b.post("wait_for", map[string]any{"match": "\n2999\n", "from_cursor": 0, "timeout_ms": 1000})
	if w["matched"] != true {
		t.Fatalf("wait_for old output after restart: %v", w)
	}
}

// TestSnapshotStart: the start loads the snapshot and feeds the model only
// the log after its seq (never an event before it); the result equals a
// replay of the whole log, and the block left open after the snapshot is
// closed (daemon_crashed) from it.
func TestSnapshotStart(t *testing.T) {
	h := ptyWithHistory(t)
	covered, err := pty.SnapshotCovers(h)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	b := reopenManager(t, h, &logs)
	if strings.Contains(logs.String(), "snapshot ignored") {
		t.Fatalf("sound snapshot ignored: %s", logs.String())
	}
	fed, first := b.mgr.Fed()
	last := b.eng.Log().LastSeq()
	// Fed: the two events appended after the snapshot, then the END of
	// the open block that the start appended itself.
	if b.mgr.SnapSeq() != covered || first != covered+1 || uint64(fed) != last-covered {
		t.Fatalf("snapshot covers %d (loaded %d); model fed %d events from seq %d, log ends at %d", covered, b.mgr.SnapSeq(), fed, first, last)
	}
	blk := b.get("blocks/blk_after")["block"].(map[string]any)
	if blk["status"] != events.BlockFailed || blk["reason"] != pty.ReasonDaemonCrashed {
		t.Fatalf("block open past the snapshot: %v", blk)
	}
	checkSameAsReplay(t, b)
}

// TestSnapshotRejected: a snapshot with a flipped byte, cut short, of
// another code version, covering seqs past the log or another event is
// ignored (and logged); the model is rebuilt from the whole log.
func TestSnapshotRejected(t *testing.T) {
	read := func(t *testing.T, path string) (snapshot.Header, []byte) {
		model, version := pty.SnapshotModelVersion()
		h, body, err := snapshot.Read(path, model, version)
		if err != nil {
			t.Fatal(err)
		}
		return h, body
	}
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
		"garbage": func(t *testing.T, path string) {
			os.WriteFile(path, []byte("CMSNAP1\nnot msgpack at all, and no CRC"), 0o600)
		},
		"other version": func(t *testing.T, path string) {
			h, body := read(t, path)
			h.Version = "0/old"
			snapshot.Write(path, h, body)
		},
		"past the log": func(t *testing.T, path string) {
			h, body := read(t, path)
			h.Seq += 1000
			snapshot.Write(path, h, body)
		},
		"another event": func(t *testing.T, path string) {
			h, body := read(t, path)
			h.EventID = "01a20000-0000-7000-8000-000000000000"
			snapshot.Write(path, h, body)
		},
		"body not the model": func(t *testing.T, path string) {
			h, _ := read(t, path)
			body, _ := events.Marshal(map[string]any{"convs": []map[string]any{{"id": "conv1", "size": -5}}})
			snapshot.Write(path, h, body)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := ptyWithHistory(t)
			damage(t, pty.SnapshotFile(h))
			var logs bytes.Buffer
			b := reopenManager(t, h, &logs)
			if !strings.Contains(logs.String(), "terminal snapshot ignored") {
				t.Fatalf("no warning logged: %q", logs.String())
			}
			fed, first := b.mgr.Fed()
			if first != 1 || uint64(fed) != b.eng.Log().LastSeq() {
				t.Fatalf("model fed %d events from seq %d; want the whole log (%d)", fed, first, b.eng.Log().LastSeq())
			}
			checkSameAsReplay(t, b)
		})
	}
}

// snapChildEnv names the home of TestHelperSnapshotWriter.
const snapChildEnv = "CMLAB_PTY_SNAP_CHILD"

// TestHelperSnapshotWriter is the child of TestSnapshotSIGKILLMidWrite: a
// writer of terminal events and snapshots over the home snapChildEnv
// names, as fast as it can, until it is killed.
func TestHelperSnapshotWriter(t *testing.T) {
	h, eng, mgr, fail := openChild(t, snapChildEnv, "TestSnapshotSIGKILLMidWrite", "snap child", pty.Options{})
	ctx := context.Background()
	var off int64
	for i := 0; ; i++ {
		blk := events.Block{BlockID: fmt.Sprintf("blk_%d", i), Seq: i + 1, Mode: "block", Cmd: "x", Status: events.BlockRunning, SpoolBegin: off}
		data := []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 50))
		evs := []*events.Event{events.MustNew("conv1", &events.PtyBlockBegin{Block: blk}),
			events.MustNew("conv1", &events.PtyOutput{BlockID: blk.BlockID, SpoolOffset: off, Data: data})}
		off += int64(len(data))
		if i%3 != 2 {
			blk.Status, blk.SpoolEnd = events.BlockCompleted, off
			evs = append(evs, events.MustNew("conv1", &events.PtyBlockEnd{Block: blk}))
		} else {
			blk.Status, blk.SpoolEnd = events.BlockFailed, off
			evs = append(evs, events.MustNew("conv1", &events.PtyBlockEnd{Block: blk}))
		}
		if _, err := eng.Append(ctx, evs...); err != nil {
			fail(err)
		}
		if _, err := mgr.WriteSnapshotNow(); err != nil {
			fail(err)
		}
		if i == 20 {
			os.WriteFile(filepath.Join(h.Dir, "snapchild.ready"), nil, 0o600)
		}
	}
}

// killMidSnapshotWrite starts the crash child helper on a new home (named
// by env), waits up to ready for it to create the file ready there, then
// kills it at a moment a temporary snapshot file exists (a write in
// progress), and returns the home.
func killMidSnapshotWrite(t *testing.T, helper, env, ready string, wait time.Duration) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	child := crashchild.Start(t, helper, env+"="+h.Dir)
	t.Cleanup(child.Stop)
	child.AwaitFile(t, filepath.Join(h.Dir, ready), wait)
	pattern := pty.SnapshotFile(h) + ".tmp-*"
	deadline := time.Now().Add(30 * time.Second)
	for { // no pause between looks: a write in progress is brief
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			child.Stop()
			t.Fatal("never saw a snapshot write in progress")
		}
	}
	child.Kill(t)
	return h
}

// TestSnapshotSIGKILLMidWrite kills a process that writes the terminal
// snapshot in a loop, at the moment a temporary snapshot file exists (a
// write in progress); the restart removes the leftover, loads the last
// whole snapshot (or none) and holds the same state as a replay of the log.
func TestSnapshotSIGKILLMidWrite(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			h := killMidSnapshotWrite(t, "TestHelperSnapshotWriter", snapChildEnv, "snapchild.ready", 30*time.Second)
			pattern := pty.SnapshotFile(h) + ".tmp-*"
			var logs bytes.Buffer
			eng, err := engine.Open(context.Background(), engine.Options{Home: h})
			if err != nil {
				t.Fatal(err)
			}
			b := openBridgeWith(t, h, eng, pty.Options{Dir: h.Dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if left, _ := filepath.Glob(pattern); len(left) != 0 {
				t.Fatalf("temporary snapshot files left: %v", left)
			}
			if strings.Contains(logs.String(), "snapshot ignored") {
				t.Fatalf("a snapshot written by rename was refused: %s", logs.String())
			}
			covered, err := pty.SnapshotCovers(h)
			if err != nil || covered == 0 {
				t.Fatalf("snapshot after the kill: %d, %v", covered, err)
			}
			if fed, first := b.mgr.Fed(); first != covered+1 && fed != 0 {
				t.Fatalf("model fed from seq %d, snapshot covers %d", first, covered)
			}
			b.barrier()
			if got, want := b.mgr.ModelBytes(), pty.ReplayModelBytes(b.eng); !bytes.Equal(got, want) {
				t.Fatal("model after the kill differs from a replay of the log")
			}
			b.checkLifecycles()
		})
	}
}

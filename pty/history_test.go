package pty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/snapshot"
)

// historyHome is a home whose log holds, as the terminal writes them,
// blocks closed blocks of conv1 (with exec inputs, echoed exec lines,
// sends, markers, prompts) and a short conv2, and no snapshot yet.
func historyHome(t testing.TB, blocks int) home.Home {
	t.Helper()
	return historyHomeWith(t, blocks, nil)
}

// historyHomeWith is historyHome with the events extra gives after each
// block of conv1 (nil: none).
func historyHomeWith(t testing.TB, blocks int, extra func(i int, spool *int64) []*events.Event) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var batch []*events.Event
	flush := func() {
		if _, err := eng.Append(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for _, conv := range []string{"conv1", "conv2"} {
		n := blocks
		if conv == "conv2" {
			n = 3
		}
		spool := int64(0)
		batch = append(batch, events.MustNew(conv, &events.PtySessionStarted{ConversationID: conv, ShellID: "sh_" + conv, Pid: 7, Cols: 200, Rows: 50, Cwd: "/w"}))
		for i := 1; i <= n; i++ {
			batch = append(batch, historyBlock(conv, i, &spool)...)
			if extra != nil && conv == "conv1" {
				batch = append(batch, extra(i, &spool)...)
			}
			if len(batch) > 2000 {
				flush()
			}
		}
	}
	flush()
	return h
}

// historyBlock is block i of conv as the terminal logs it: its BEGIN and
// exec input, its output (an echoed exec line every 7th, a send every
// 5th, a cap marker every 13th), its prompt and END; spool is the
// conversation's spool size, moved past it.
func historyBlock(conv string, i int, spool *int64) []*events.Event {
	zero, one := 0, 1
	var batch []*events.Event
	id := fmt.Sprintf("blk_%s_%05d", conv, i)
	line := fmt.Sprintf("eval $'echo %d'\r", i)
	b := events.Block{BlockID: id, Seq: i, Mode: "block", ShellID: "sh_" + conv, Cmd: fmt.Sprintf("echo %d", i), Cwd: "/w",
		TsBegin: int64(1000 + i), Status: events.BlockRunning, OutputPath: "blocks/" + id + ".out", SpoolBegin: *spool}
	batch = append(batch, events.MustNew(conv, &events.PtyBlockBegin{Block: b}),
		events.MustNew(conv, &events.PtyInput{Data: []byte(line), BlockID: id, Source: "exec"}))
	out := func(data string) {
		batch = append(batch, events.MustNew(conv, &events.PtyOutput{BlockID: id, SpoolOffset: *spool, Data: []byte(data)}))
		*spool += int64(len(data))
	}
	if i%7 == 0 {
		out(line) // a program turned echo back on
	}
	out(fmt.Sprintf("line %d a\nneedle %d\n", i, i))
	if i == 3 { // a line of the events view longer than its reader's buffer
		batch = append(batch, events.MustNew(conv, &events.PtyInput{Data: []byte(strings.Repeat("long input ", 30<<10)), BlockID: id, Source: "send"}))
	}
	if i%5 == 0 {
		batch = append(batch, events.MustNew(conv, &events.PtyInput{Data: []byte("y\r"), BlockID: id, Source: "send"}))
		out("answered\n")
	}
	if i%13 == 0 {
		m := "[cmlab: output truncated at the block cap of 10 bytes]\n"
		batch = append(batch, events.MustNew(conv, &events.PtyTruncated{BlockID: id, SpoolOffset: *spool, Line: m, Dropped: 10, Limit: 10, Scope: "block"}))
		*spool += int64(len(m))
		b.Dropped = 10
	}
	exit := &zero
	if i%11 == 0 {
		exit = &one
	}
	p := fmt.Sprintf("__FWS_PROMPT__ ts=%d cwd_b64=L3c= exit=%d\n", 2000+i, *exit)
	b.Status, b.ExitCode, b.TsEnd, b.SpoolEnd = events.BlockCompleted, exit, int64(2000+i), *spool
	batch = append(batch, events.MustNew(conv, &events.PtyPrompt{PromptTS: int64(2000 + i), Cwd: "/w", ExitCode: exit, SpoolOffset: *spool, Line: p, BlockID: id}),
		events.MustNew(conv, &events.PtyBlockEnd{Block: b}))
	*spool += int64(len(p))
	return batch
}

// historyAnswers opens a manager on h (HistoryBlocks keep), asks it what
// the terminal routes ask of a conversation's past, and closes it.
func historyAnswers(t *testing.T, h home.Home, keep int) (string, *pty.Manager) {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := pty.NewManager(eng, pty.Options{Dir: h.Dir, HistoryBlocks: keep, IdleTimeout: -1})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	defer func() {
		mgr.Close(context.Background())
		eng.Close()
	}()
	ctx := context.Background()
	var out strings.Builder
	add := func(what string, v any, err error) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(&out, "%s: %s %v\n", what, b, err)
	}
	st, err := mgr.Status(ctx, "conv1")
	st.TotalStoredBytes = 0 // the home's spools, not the model's
	add("status", st, err)
	n := int(st.Blocks)
	for _, since := range []int{0, 1, 7, n / 2, n - 150, n - 101, n - 100, n - 2, n} {
		r, err := mgr.BlocksSince(ctx, "conv1", since, 0)
		add(fmt.Sprintf("since %d", since), r, err)
		r, err = mgr.BlocksSince(ctx, "conv1", since, 3)
		add(fmt.Sprintf("since %d limit 3", since), r, err)
	}
	for _, i := range []int{1, 5, 7, 13, 14, 35, n / 2, n - 120, n - 99, n} {
		id := fmt.Sprintf("blk_conv1_%05d", i)
		b, err := mgr.Block(ctx, "conv1", id)
		add("block "+id, b, err)
		for _, raw := range []bool{true, false} {
			o, err := mgr.BlockOutputView(ctx, "conv1", id, 0, 0, raw)
			add(fmt.Sprintf("output %s raw %v", id, raw), o, err)
			o, err = mgr.BlockOutputView(ctx, "conv1", id, 3, 5, raw)
			add(fmt.Sprintf("output %s 3+5 raw %v", id, raw), o, err)
		}
		s, err := mgr.Search(ctx, "conv1", "needle", id)
		add("search in "+id, s, err)
		r, err := mgr.AwaitBlock(ctx, "conv1", id, 1, 0, false)
		add("await "+id, r, err)
	}
	for _, q := range []string{"needle 1\n", "needle", "answered", "truncated", fmt.Sprintf("needle %d\n", n)} {
		s, err := mgr.Search(ctx, "conv1", q, "")
		add("search "+q, s, err)
	}
	_, err = mgr.Block(ctx, "conv1", "blk_none")
	add("block none", nil, err)
	_, err = mgr.BlockOutput(ctx, "conv1", "blk_none", 0, 0)
	add("output none", nil, err)
	size := st.ResumeCursor
	for _, from := range []int64{0, 40, size / 3, size / 2, size - 9000, size - 3000, size - 100} {
		for _, raw := range []bool{true, false} {
			r, err := mgr.ReadSpoolView(ctx, "conv1", from, 4096, raw)
			add(fmt.Sprintf("read %d raw %v", from, raw), r, err)
		}
	}
	w, err := mgr.WaitPromptView(ctx, "conv1", 0, 1, false)
	add("wait prompt", w, err)
	w, err = mgr.WaitFor(ctx, "conv1", pty.WaitParams{Match: "needle 2\n", FromCursor: 0, TimeoutMs: 1})
	add("wait for", w, err)
	r, err := mgr.BlocksSince(ctx, "conv2", 0, 0)
	add("conv2", r, err)
	return out.String(), mgr
}

// TestHistoryAnswersIdentical: a conversation with many closed blocks
// answers block lists, lookups, outputs (raw and clean), searches, reads
// and waits exactly as a model that keeps every block, built from the log
// and after a restart from the bounded snapshot.
func TestHistoryAnswersIdentical(t *testing.T) {
	h := historyHome(t, 700)
	fresh, _ := historyAnswers(t, h, 0) // built from the log, then its snapshot written at close
	covered, err := pty.SnapshotCovers(h)
	if err != nil || covered == 0 {
		t.Fatalf("no snapshot after close: %d %v", covered, err)
	}
	restarted, _ := historyAnswers(t, h, 0)
	if err := os.Remove(pty.SnapshotFile(h)); err != nil {
		t.Fatal(err)
	}
	all, _ := historyAnswers(t, h, -1)
	if strings.Contains(all, "Error") || !strings.Contains(all, `"block_id":"blk_conv1_00001"`) {
		t.Fatalf("the reference answers look wrong:\n%.2000s", all)
	}
	for name, got := range map[string]string{"built from the log": fresh, "restarted": restarted} {
		if got != all {
			gl, wl := strings.Split(got, "\n"), strings.Split(all, "\n")
			for i := range min(len(gl), len(wl)) {
				if gl[i] != wl[i] {
					t.Fatalf("%s: answer %d differs:\n got %.600s\nwant %.600s", name, i, gl[i], wl[i])
				}
			}
			t.Fatalf("%s: %d answers, want %d", name, len(gl), len(wl))
		}
	}
}

// TestHistoryIrregular: a conversation whose past the events view cannot
// give back exactly (an input that is not UTF-8) keeps what it holds from
// then on; one whose log names dropped blocks again (a second END, late
// output: never written by the terminal) reads every list back whole.
// Both answer as a model that keeps every block.
func TestHistoryIrregular(t *testing.T) {
	type irregular = func(i int, spool *int64) []*events.Event
	for name, extra := range map[string]irregular{
		"not UTF-8": func(i int, spool *int64) []*events.Event {
			if i != 300 {
				return nil
			}
			return []*events.Event{events.MustNew("conv1", &events.PtyInput{Data: []byte("\xff\xfe typed"), Source: "send"})}
		},
		"dropped block named again": func(i int, spool *int64) []*events.Event {
			if i != 380 {
				return nil
			}
			zero := 0
			again := events.Block{BlockID: "blk_conv1_00005", Seq: 5, Mode: "block", Cmd: "echo 5", Cwd: "/w", Status: events.BlockFailed,
				ExitCode: &zero, Reason: "again", OutputPath: "blocks/blk_conv1_00005.out", SpoolBegin: 1, SpoolEnd: 2}
			late := []byte("late output of block 6\n")
			evs := []*events.Event{events.MustNew("conv1", &events.PtyBlockEnd{Block: again}),
				events.MustNew("conv1", &events.PtyOutput{BlockID: "blk_conv1_00006", SpoolOffset: *spool, Data: late})}
			*spool += int64(len(late))
			return evs
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := historyHomeWith(t, 400, extra)
			fresh, _ := historyAnswers(t, h, 0)
			restarted, _ := historyAnswers(t, h, 0)
			if err := os.Remove(pty.SnapshotFile(h)); err != nil {
				t.Fatal(err)
			}
			all, _ := historyAnswers(t, h, -1)
			if fresh != all || restarted != all {
				t.Fatalf("answers differ from a model of every block:\nfresh %.1500s\nrestarted %.1500s\nwant %.1500s", fresh, restarted, all)
			}
		})
	}
}

// TestHistoryBounded: the snapshot and the heap of a start do not grow
// with the number of closed blocks: 200 and 5,000 blocks give snapshots
// within a few bytes of each other and heaps within 1 MiB.
func TestHistoryBounded(t *testing.T) {
	size := map[int]int64{}
	heap := map[int]uint64{}
	for _, n := range []int{200, 5000} {
		h := historyHome(t, n)
		startHeap(t, h, false) // builds the model from the log; its snapshot is written at close // builds the model and writes its snapshot at close
		fi, err := os.Stat(pty.SnapshotFile(h))
		if err != nil {
			t.Fatal(err)
		}
		size[n] = fi.Size()
		heap[n] = startHeap(t, h, true)
		if covered, err := pty.SnapshotCovers(h); err != nil || covered == 0 {
			t.Fatalf("no snapshot: %v", err)
		}
	}
	t.Logf("snapshot %d / %d bytes, heap after start %d / %d bytes", size[200], size[5000], heap[200], heap[5000])
	// The 200-block snapshot holds all 200 blocks; the 5,000-block one
	// between 100 and 200 of them, whatever the history's length.
	if size[5000] > size[200]+4096 {
		t.Errorf("snapshot of 5,000 blocks is %d bytes, of 200 blocks %d: it grows with history", size[5000], size[200])
	}
	if heap[5000] > heap[200]+1<<20 {
		t.Errorf("heap after a start of 5,000 blocks %d bytes, of 200 blocks %d: it grows with history", heap[5000], heap[200])
	}
}

// startHeap is the live heap after a manager started on h, the engine's
// own share included; loaded: the start must have loaded its snapshot.
func startHeap(t *testing.T, h home.Home, loaded bool) uint64 {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	mgr, err := pty.NewManager(eng, pty.Options{Dir: h.Dir, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close(context.Background())
	if n, _ := mgr.Fed(); loaded && n > 0 {
		t.Fatalf("the start was fed %d events: the snapshot was not loaded", n)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHistorySnapshotOfSchema2Rebuilt: a snapshot of the previous schema
// (every block, no history counts) is ignored at start; the model is
// rebuilt from the log, bounded, and a snapshot of this schema replaces
// it at close.
func TestHistorySnapshotOfSchema2Rebuilt(t *testing.T) {
	h := historyHome(t, 700)
	historyAnswers(t, h, -1) // a snapshot of every block
	path := pty.SnapshotFile(h)
	model, version := pty.SnapshotModelVersion()
	hd, body, err := snapshot.Read(path, model, version)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "3/") {
		t.Fatalf("terminal snapshot version %q, want schema 3", version)
	}
	old := len(body)
	hd.Version = "2/" + snapshot.CodeVersion()
	if err := snapshot.Write(path, hd, body); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	b := reopenManager(t, h, &logs)
	if !strings.Contains(logs.String(), "terminal snapshot ignored") {
		t.Fatalf("a schema-2 snapshot was not ignored; log:\n%s", logs.String())
	}
	if got, want := b.mgr.ModelBytes(), pty.ReplayModelBytes(b.eng); !bytes.Equal(got, want) {
		t.Fatalf("model (%d bytes) differs from a replay of the log (%d bytes)", len(got), len(want))
	}
	b.close()
	_, body, err = snapshot.Read(path, model, version)
	if err != nil {
		t.Fatalf("no snapshot of this schema after close: %v", err)
	}
	if len(body) > old/3 {
		t.Fatalf("snapshot after the rebuild %d bytes, of every block %d: not bounded", len(body), old)
	}
}

// historyChildEnv names the home of TestHelperHistorySnapshotWriter.
const historyChildEnv = "CMLAB_PTY_HISTORY_CHILD"

// TestHelperHistorySnapshotWriter is the child of
// TestHistorySnapshotSIGKILL: it logs blocks of conv1 and writes the
// terminal snapshot after each, as fast as it can, until it is killed;
// it says it is ready once blocks were dropped from memory.
func TestHelperHistorySnapshotWriter(t *testing.T) {
	h, eng, mgr, fail := openChild(t, historyChildEnv, "TestHistorySnapshotSIGKILL", "history child", pty.Options{IdleTimeout: -1})
	ctx := context.Background()
	var spool int64
	if _, err := eng.Append(ctx, events.MustNew("conv1", &events.PtySessionStarted{ConversationID: "conv1", ShellID: "sh_conv1", Pid: 7, Cols: 200, Rows: 50, Cwd: "/w"})); err != nil {
		fail(err)
	}
	for i := 1; ; i++ {
		if _, err := eng.Append(ctx, historyBlock("conv1", i, &spool)...); err != nil {
			fail(err)
		}
		if _, err := mgr.WriteSnapshotNow(); err != nil {
			fail(err)
		}
		if i == 260 {
			os.WriteFile(filepath.Join(h.Dir, "historychild.ready"), nil, 0o600)
		}
	}
}

// TestHistorySnapshotSIGKILL kills a process writing the bounded
// terminal snapshot of a conversation that dropped blocks, while a write
// is in progress; the restarted home holds the model a replay of the log
// gives and answers as a model that keeps every block.
func TestHistorySnapshotSIGKILL(t *testing.T) {
	for round := range 2 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			h := killMidSnapshotWrite(t, "TestHelperHistorySnapshotWriter", historyChildEnv, "historychild.ready", 60*time.Second)
			var logs bytes.Buffer
			b := reopenManager(t, h, &logs)
			if strings.Contains(logs.String(), "snapshot ignored") {
				t.Fatalf("a snapshot written by rename was refused: %s", logs.String())
			}
			b.barrier()
			if got, want := b.mgr.ModelBytes(), pty.ReplayModelBytes(b.eng); !bytes.Equal(got, want) {
				t.Fatal("model after the kill differs from a replay of the log")
			}
			b.close()
			got, _ := historyAnswers(t, h, 0)
			if err := os.Remove(pty.SnapshotFile(h)); err != nil {
				t.Fatal(err)
			}
			want, _ := historyAnswers(t, h, -1)
			if got != want {
				t.Fatalf("answers after the kill differ from a model of every block:\n got %.1500s\nwant %.1500s", got, want)
			}
		})
	}
}

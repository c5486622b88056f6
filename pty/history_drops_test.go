package pty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/snapshot"
)

// droppedBlock is the id of the i-th block (from 1) of drop k of conv1.
func droppedBlock(t *testing.T, drops []pty.DropCounts, k, i int) string {
	t.Helper()
	if len(drops) <= k {
		t.Fatalf("%d drops, want more than %d", len(drops), k)
	}
	first := 1
	if k > 0 {
		first = drops[k-1].MaxSeq + 1
	}
	return fmt.Sprintf("blk_conv1_%05d", first+i-1)
}

// TestHistoryReadChecksOnlyItsDrop: after a start (the model built from
// the log, or loaded from its snapshot), a read of a block dropped in
// drop K, of its output, and of a page of the block list there, checks
// exactly drop K's records against their sums: not the rest of the past.
func TestHistoryReadChecksOnlyItsDrop(t *testing.T) {
	ctx := context.Background()
	for _, fromSnapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", fromSnapshot), func(t *testing.T) {
			h := historyHome(t, 1000)
			if fromSnapshot {
				historyAnswers(t, h, 0) // writes the snapshot at close
			}
			mgr := openHistory(t, h)
			if n, _ := mgr.Fed(); fromSnapshot && n > 0 {
				t.Fatalf("the start was fed %d events: the snapshot was not loaded", n)
			}
			drops := mgr.Drops("conv1")
			const k = 5
			id := droppedBlock(t, drops, k, 7)
			d := drops[k]
			checked := func(what string, want [3]int64, read func() error) {
				t.Helper()
				before := mgr.Hashed()
				if err := read(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				after := mgr.Hashed()
				if got := [3]int64{after[0] - before[0], after[1] - before[1], after[2] - before[2]}; got != want {
					t.Errorf("%s checked %v blocks, prompts, inputs; want %v (drop %d of %d)", what, got, want, k, len(drops))
				}
			}
			whole := [3]int64{d.Blocks, d.Prompts, d.Inputs}
			checked("block", whole, func() error {
				b, err := mgr.Block(ctx, "conv1", id)
				if err == nil && b.Block.BlockID != id {
					err = fmt.Errorf("got block %s", b.Block.BlockID)
				}
				return err
			})
			checked("output", whole, func() error {
				o, err := mgr.BlockOutput(ctx, "conv1", id, 0, 0)
				if err == nil && !strings.Contains(o.Data, "needle") {
					err = fmt.Errorf("output %q", o.Data)
				}
				return err
			})
			checked("block list", [3]int64{d.Blocks, 0, 0}, func() error {
				r, err := mgr.BlocksSince(ctx, "conv1", drops[k-1].MaxSeq, 50)
				if err == nil && (len(r.Blocks) != 50 || r.Blocks[6].BlockID != id) {
					err = fmt.Errorf("got %d blocks", len(r.Blocks))
				}
				return err
			})
			checked("unknown block", [3]int64{}, func() error {
				if _, err := mgr.Block(ctx, "conv1", "blk_none"); !errors.Is(err, pty.ErrNotFound) {
					return fmt.Errorf("%v, want ErrNotFound", err)
				}
				return nil
			})
		})
	}
}

// TestHistoryAlteredDropCaughtAfterAnother: a drop's records changed in
// the events view after another drop was read and checked are refused
// when that drop is read; the other drop still answers as before.
func TestHistoryAlteredDropCaughtAfterAnother(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		line   string                         // a regexp matching the line to alter, %s the block id
		change func(num int) (string, string) // of block num's line, what becomes what
	}{
		{"command", `"type":"agent_block_end"[^\n]*"block_id":"%s"`, func(n int) (string, string) {
			return fmt.Sprintf(`"cmd":"echo %d"`, n), fmt.Sprintf(`"cmd":"echo %d"`, n+1)
		}},
		{"output", `"type":"agent_block_delta","block_id":"%s"`, func(n int) (string, string) {
			l := len(fmt.Sprintf("line %d a\nneedle %d\n", n, n))
			return fmt.Sprintf(`"len":%d`, l), fmt.Sprintf(`"len":%d`, l-1)
		}},
		{"prompt", `"type":"agent_prompt","block_id":"%s"`, func(int) (string, string) { return `"cwd":"/w"`, `"cwd":"/x"` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := historyHome(t, 1000)
			mgr := openHistory(t, h)
			drops := mgr.Drops("conv1")
			kid, jid := droppedBlock(t, drops, 6, 3), droppedBlock(t, drops, 2, 3)
			kb, err := mgr.Block(ctx, "conv1", kid)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mgr.Block(ctx, "conv1", jid); err != nil {
				t.Fatal(err)
			}
			var num int
			fmt.Sscanf(jid, "blk_conv1_%d", &num)
			old, new := tc.change(num)
			alterLine(t, h, regexp.MustCompile(fmt.Sprintf(tc.line, jid)), old, new)
			if got, err := mgr.Block(ctx, "conv1", kid); err != nil || !reflect.DeepEqual(got, kb) {
				t.Errorf("the unaltered drop: %v %v, want its block as before", got, err)
			}
			if b, err := mgr.Block(ctx, "conv1", jid); !errors.Is(err, pty.ErrSpoolUnavailable) {
				t.Errorf("the altered drop's block: %v %v, want ErrSpoolUnavailable", b, err)
			}
			if o, err := mgr.BlockOutput(ctx, "conv1", jid, 0, 0); !errors.Is(err, pty.ErrSpoolUnavailable) {
				t.Errorf("the altered drop's output: %v %v, want ErrSpoolUnavailable", o, err)
			}
			if !projections.ViewsStale(h) {
				t.Error("the altered view was refused without marking the views stale")
			}
		})
	}
}

// rewriteView replaces conv1's events view by a new file (as a
// regeneration does) holding edit of its bytes.
func rewriteView(t *testing.T, h home.Home, edit func([]byte) []byte) {
	t.Helper()
	path := filepath.Join(h.Dir, filepath.FromSlash(projections.PtyEventsView("conv1")))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", edit(b), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryViewReplacedBetweenReads: a view replaced between two reads
// of one drop is checked again: by the same records it answers as before,
// by other records (one of the drop's commands changed) it is refused.
func TestHistoryViewReplacedBetweenReads(t *testing.T) {
	ctx := context.Background()
	h := historyHome(t, 1000)
	mgr := openHistory(t, h)
	id := droppedBlock(t, mgr.Drops("conv1"), 4, 9)
	want, err := mgr.Block(ctx, "conv1", id)
	if err != nil {
		t.Fatal(err)
	}
	rewriteView(t, h, func(b []byte) []byte { return b })
	if got, err := mgr.Block(ctx, "conv1", id); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after the view was regenerated: %v %v, want %v", got, err, want)
	}
	if projections.ViewsStale(h) {
		t.Fatal("a regenerated view was reported damaged")
	}
	var num int
	fmt.Sscanf(id, "blk_conv1_%d", &num)
	rewriteView(t, h, func(b []byte) []byte {
		old := fmt.Sprintf(`"cmd":"echo %d","cwd"`, num)
		if bytes.Count(b, []byte(old)) != 2 { // its BEGIN and END
			t.Fatalf("%q occurs %d times", old, bytes.Count(b, []byte(old)))
		}
		return bytes.ReplaceAll(b, []byte(old), []byte(fmt.Sprintf(`"cmd":"echo %d; rm -rf ~","cwd"`, num)))
	})
	if got, err := mgr.Block(ctx, "conv1", id); !errors.Is(err, pty.ErrSpoolUnavailable) {
		t.Fatalf("after the view was replaced by other records: %v %v, want ErrSpoolUnavailable", got, err)
	}
}

// TestHistorySnapshotWithoutDropsRebuilt: a terminal snapshot whose
// conversations hold no drops and no seqs of their records (written
// before drops kept their own sums) is not loaded; the model is rebuilt
// from the log, drops included.
func TestHistorySnapshotWithoutDropsRebuilt(t *testing.T) {
	h := historyHome(t, 300)
	historyAnswers(t, h, 0) // writes the snapshot at close
	editSnapshotHists(t, h, func(hist map[string]any) bool {
		delete(hist, "drops")
		delete(hist, "perDrop")
		return true
	})
	br := reopenRebuilt(t, h, "a snapshot without drops")
	defer br.close()
	if len(br.mgr.Drops("conv1")) == 0 {
		t.Fatal("the rebuilt model has no drops")
	}
}

// editSnapshotHists rewrites h's terminal snapshot with edit applied to
// each conversation's history; it returns how many edit changed.
func editSnapshotHists(t *testing.T, h home.Home, edit func(hist map[string]any) bool) int {
	t.Helper()
	path := pty.SnapshotFile(h)
	model, version := pty.SnapshotModelVersion()
	hd, body, err := snapshot.Read(path, model, version)
	if err != nil {
		t.Fatal(err)
	}
	var sn map[string]any
	if err := events.Unmarshal(body, &sn); err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, c := range sn["convs"].([]any) {
		if edit(c.(map[string]any)["hist"].(map[string]any)) {
			changed++
		}
	}
	if body, err = events.Marshal(sn); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Write(path, hd, body); err != nil {
		t.Fatal(err)
	}
	return changed
}

// reopenRebuilt reopens h, whose terminal snapshot (what) must be ignored
// and the model rebuilt from the log.
func reopenRebuilt(t *testing.T, h home.Home, what string) *bridge {
	t.Helper()
	var logs bytes.Buffer
	br := reopenManager(t, h, &logs)
	if !strings.Contains(logs.String(), "terminal snapshot ignored") {
		br.close()
		t.Fatalf("%s was loaded; log:\n%s", what, logs.String())
	}
	if got, want := br.mgr.ModelBytes(), pty.ReplayModelBytes(br.eng); !bytes.Equal(got, want) {
		br.close()
		t.Fatal("model differs from a replay of the log")
	}
	return br
}

// TestHistoryDropEdgesAnswerAsAll: the first and last block of every drop
// (and the blocks around them), their outputs raw and clean, awaits and
// block-list pages starting there answer as a model that keeps every
// block, built from the log and started from its snapshot.
func TestHistoryDropEdgesAnswerAsAll(t *testing.T) {
	h := historyHome(t, 760)
	var ids []int
	var drops []pty.DropCounts
	answers := func(keep int) string {
		eng, err := engine.Open(context.Background(), engine.Options{Home: h})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		mgr, err := pty.NewManager(eng, pty.Options{Dir: h.Dir, HistoryBlocks: keep, IdleTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer mgr.Close(context.Background())
		if keep == 0 && ids == nil {
			drops = mgr.Drops("conv1")
			for _, d := range drops {
				ids = append(ids, d.MaxSeq-1, d.MaxSeq, d.MaxSeq+1, d.MaxSeq+2)
			}
		}
		ctx := context.Background()
		var out strings.Builder
		add := func(what string, v any, err error) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(&out, "%s: %s %v\n", what, b, err)
		}
		for _, i := range ids {
			id := fmt.Sprintf("blk_conv1_%05d", i)
			b, err := mgr.Block(ctx, "conv1", id)
			add("block "+id, b, err)
			for _, raw := range []bool{true, false} {
				o, err := mgr.BlockOutputView(ctx, "conv1", id, 0, 0, raw)
				add(fmt.Sprintf("output %s raw %v", id, raw), o, err)
			}
			r, err := mgr.AwaitBlock(ctx, "conv1", id, 1, 0, false)
			add("await "+id, r, err)
			s, err := mgr.Search(ctx, "conv1", "needle", id)
			add("search in "+id, s, err)
			l, err := mgr.BlocksSince(ctx, "conv1", i-1, 3)
			add(fmt.Sprintf("since %d limit 3", i-1), l, err)
		}
		return out.String()
	}
	got := answers(0) // built from the log; its snapshot written at close
	if len(drops) < 4 {
		t.Fatalf("%d drops, want at least 4", len(drops))
	}
	if restarted := answers(0); restarted != got {
		t.Fatal("answers after a start from the snapshot differ from the model built from the log")
	}
	if err := os.Remove(pty.SnapshotFile(h)); err != nil {
		t.Fatal(err)
	}
	if want := answers(-1); got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("answer %d differs:\n got %.600s\nwant %.600s", i, gl[i], wl[i])
			}
		}
		t.Fatalf("%d answers, want %d", len(gl), len(wl))
	}
}

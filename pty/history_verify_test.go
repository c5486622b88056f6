package pty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/wal"
)

// pastReads asks mgr what the routes ask of conv1's dropped past: blocks
// by id, an output, the block list from the start (whole and its first
// three), a search hitting a dropped block, a clean read of the spool's
// start. Each answer is its JSON, or the error's text.
func pastReads(t *testing.T, mgr *pty.Manager) map[string]string {
	t.Helper()
	ctx := context.Background()
	got := map[string]string{}
	add := func(what string, v any, err error) {
		if err != nil {
			if !errors.Is(err, pty.ErrSpoolUnavailable) {
				t.Errorf("%s: %v, want an answer or ErrSpoolUnavailable", what, err)
			}
			got[what] = "error"
			return
		}
		b, _ := json.Marshal(v)
		got[what] = string(b)
	}
	for _, i := range []int{5, 7, 11} {
		id := fmt.Sprintf("blk_conv1_%05d", i)
		b, err := mgr.Block(ctx, "conv1", id)
		add("block "+id, b, err)
		o, err := mgr.BlockOutput(ctx, "conv1", id, 0, 0)
		add("output "+id, o, err)
	}
	r, err := mgr.BlocksSince(ctx, "conv1", 0, 0)
	add("since 0", r, err)
	r, err = mgr.BlocksSince(ctx, "conv1", 0, 3)
	add("since 0 limit 3", r, err)
	s, err := mgr.Search(ctx, "conv1", "needle 7\n", "")
	add("search", s, err)
	v, err := mgr.ReadSpoolView(ctx, "conv1", 0, 2048, false)
	add("clean read", v, err)
	return got
}

// openHistory opens an engine and a manager keeping the default number of
// blocks on h; both are closed at the test's end.
func openHistory(t testing.TB, h home.Home) *pty.Manager {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := pty.NewManager(eng, pty.Options{Dir: h.Dir, IdleTimeout: -1})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mgr.Close(context.Background())
		eng.Close()
	})
	return mgr
}

// alterLine rewrites, in place and keeping its length and its JSON valid,
// the first line of conv1's events view that matches line; old must occur
// in it once and becomes new.
func alterLine(t *testing.T, h home.Home, line *regexp.Regexp, old, new string) {
	t.Helper()
	if len(old) != len(new) {
		t.Fatal("the alteration must keep the line's length")
	}
	path := filepath.Join(h.Dir, filepath.FromSlash(projections.PtyEventsView("conv1")))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	loc := line.FindIndex(b)
	if loc == nil {
		t.Fatalf("no line matches %s", line)
	}
	start := bytes.LastIndexByte(b[:loc[0]], '\n') + 1
	end := loc[1] + bytes.IndexByte(b[loc[1]:], '\n') + 1
	l := b[start:end]
	if bytes.Count(l, []byte(old)) != 1 {
		t.Fatalf("%q occurs %d times in %s", old, bytes.Count(l, []byte(old)), l)
	}
	altered := bytes.Replace(l, []byte(old), []byte(new), 1)
	if !json.Valid(altered) {
		t.Fatalf("altered line is not JSON: %s", altered)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(altered, int64(start)); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryReadBackAltered: bytes of a dropped block's lines changed in
// the events view while the manager runs (its command, its exit status,
// an output's offset; the JSON still valid, the length the same) are
// never served: a read of the dropped past answers as before, or
// ErrSpoolUnavailable.
func TestHistoryReadBackAltered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		line     string // a regexp matching the line to alter
		old, new string
	}{
		{"command", `"type":"agent_block_end"[^\n]*"block_id":"blk_conv1_00005"`, `"cmd":"echo 5"`, `"cmd":"echo 8"`},
		{"exit status", `"type":"agent_block_end"[^\n]*"block_id":"blk_conv1_00011"`, `"exit_code":1`, `"exit_code":0`},
		{"output offset", `"type":"agent_block_delta","block_id":"blk_conv1_00007"`, `"len":15`, `"len":14`},
		{"prompt", `"type":"agent_prompt","block_id":"blk_conv1_00002"`, `"cwd":"/w"`, `"cwd":"/x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := historyHome(t, 300)
			mgr := openHistory(t, h)
			want := pastReads(t, mgr)
			for what, a := range want {
				if a == "error" {
					t.Fatalf("%s: no answer before the alteration", what)
				}
			}
			alterLine(t, h, regexp.MustCompile(tc.line), tc.old, tc.new)
			got := pastReads(t, mgr)
			errs := 0
			for what, a := range got {
				if a == "error" {
					errs++
					continue
				}
				if a != want[what] {
					t.Errorf("%s: after the alteration\n got %.400s\nwant %.400s", what, a, want[what])
				}
			}
			t.Logf("%d of %d reads refused", errs, len(got))
			if errs > 0 && !projections.ViewsStale(h) {
				t.Error("a read refused the altered view without marking the views stale")
			}
		})
	}
}

// TestHistoryReadBackViewRewritten: the events view replaced under a
// running manager by the same bytes (as a regeneration from the log
// writes them), rebuilt at open, or every view rebuilt from the log while
// the home was closed (cmlab rebuild) under a snapshot holding the sums,
// reads back as before: no refusal, no stale views.
func TestHistoryReadBackViewRewritten(t *testing.T) {
	h := historyHome(t, 300)
	mgr := openHistory(t, h)
	want := pastReads(t, mgr)
	path := filepath.Join(h.Dir, filepath.FromSlash(projections.PtyEventsView("conv1")))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if got := pastReads(t, mgr); !maps.Equal(got, want) {
		t.Fatalf("after the view was rewritten with its bytes:\n got %.1500v\nwant %.1500v", got, want)
	}
	// Rebuilt at open: the checkpoint no longer vouches for a missing view.
	h2 := historyHome(t, 300)
	if err := os.Remove(filepath.Join(h2.Dir, filepath.FromSlash(projections.PtyEventsView("conv1")))); err != nil {
		t.Fatal(err)
	}
	if got := pastReads(t, openHistory(t, h2)); !maps.Equal(got, want) {
		t.Fatalf("after the view was rebuilt at open:\n got %.1500v\nwant %.1500v", got, want)
	}
	// Every view rebuilt from the log, as cmlab rebuild does, after a
	// snapshot with the sums was written.
	h3 := historyHome(t, 300)
	historyAnswers(t, h3, 0)
	r, err := wal.OpenReader(h3.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := projections.Rebuild(context.Background(), r.Events(1), h3, projections.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	mgr3 := openHistory(t, h3)
	if n, _ := mgr3.Fed(); n > 0 {
		t.Fatalf("the start was fed %d events: the snapshot was not loaded", n)
	}
	if got := pastReads(t, mgr3); !maps.Equal(got, want) {
		t.Fatalf("after the views were rebuilt from the log:\n got %.1500v\nwant %.1500v", got, want)
	}
	for _, hh := range []home.Home{h, h2, h3} {
		if projections.ViewsStale(hh) {
			t.Fatal("a healthy view was reported damaged")
		}
	}
}

// TestHistorySnapshotWithoutSumsRebuilt: a terminal snapshot of a
// conversation that dropped records but holds no sums of them (written
// before they existed) is not loaded; the model is rebuilt from the log,
// sums included.
func TestHistorySnapshotWithoutSumsRebuilt(t *testing.T) {
	h := historyHome(t, 300)
	historyAnswers(t, h, 0) // writes the snapshot at close
	stripped := editSnapshotHists(t, h, func(hist map[string]any) bool {
		if fmt.Sprint(hist["blocks"]) == "0" {
			return false
		}
		delete(hist, "sums")
		delete(hist, "summed")
		return true
	})
	if stripped == 0 {
		t.Fatal("no conversation dropped blocks")
	}
	reopenRebuilt(t, h, "a snapshot without sums").close()
}

// TestFastDeltaAsJSON: the events view's lines, and variants of its output
// lines, decode by the fast path exactly as encoding/json decodes them,
// or are left to it.
func TestFastDeltaAsJSON(t *testing.T) {
	h := historyHome(t, 30)
	b, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(projections.PtyEventsView("conv1"))))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	for _, l := range lines {
		if bytes.Contains(l, []byte(`"agent_block_delta"`)) {
			for _, v := range [][2]string{{`"len":`, `"len":0`}, {`"len":`, `"len":-`}, {`"ts":`, `"ts":-`}, {`"seq":`, `"seq":0`},
				{`"block_id":"`, `"block_id":"\\u0041`}, {`"block_id":"`, `"block_id":"é`}, {`}`, `,"x":1}`}, {`"len":`, `"len":99999999999999999999`},
				{`"block_id":"blk_conv1_`, `"block_id":"`}, {`{"seq"`, ` {"seq"`}, {"}\n", "} \n"}} {
				lines = append(lines, bytes.Replace(l, []byte(v[0]), []byte(v[1]), 1))
			}
		}
	}
	fast := 0
	for _, l := range lines {
		var got, want projections.PtyEventLine
		if !pty.FastDelta(l, &got) {
			continue
		}
		fast++
		if err := json.Unmarshal(l, &want); err != nil {
			t.Fatalf("fast path decoded %q, which encoding/json refuses: %v", l, err)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Fatalf("%q: fast path %s, encoding/json %s", l, gj, wj)
		}
	}
	if fast == 0 {
		t.Fatal("the fast path decoded no line")
	}
	t.Logf("%d of %d lines by the fast path", fast, len(lines))
}

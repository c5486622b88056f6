package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// cutTailHome writes 60 events, stops cleanly (the checkpoint covers them
// all) and cuts 10 bytes off the last segment: an acknowledged entry is
// cut, not a torn write. It returns the home, the segment, its size after
// the cut and the seq of the entry cut.
func cutTailHome(t *testing.T) (home.Home, string, int64, uint64) {
	t.Helper()
	h, last := smallSegmentHome(t)
	if cp, ok, err := projections.ReadCheckpointSeq(h); err != nil || !ok || cp != last {
		t.Fatalf("checkpoint %d %v %v, want %d", cp, ok, err, last)
	}
	ents, _ := os.ReadDir(h.WALDir())
	var segs []string
	for _, e := range ents {
		if len(e.Name()) == 20 && strings.Trim(e.Name(), "0123456789") == "" {
			segs = append(segs, e.Name())
		}
	}
	sort.Strings(segs)
	seg := filepath.Join(h.WALDir(), segs[len(segs)-1])
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, fi.Size()-10); err != nil {
		t.Fatal(err)
	}
	return h, seg, fi.Size() - 10, last
}

// TestCutTailIsRefusedUntilSalvageAcceptsTheLoss: the last segment cut
// through an acknowledged entry was repaired as a torn tail, exit 0
// everywhere (issue 27's damage matrix, segment/truncate). Now every
// command refuses with exit 3 naming the fix, changing nothing; the fix,
// recover --salvage --apply, accepts the loss (views stale), and the home
// opens, serves a write and reads ok from then on.
func TestCutTailIsRefusedUntilSalvageAcceptsTheLoss(t *testing.T) {
	h, seg, size, cut := cutTailHome(t)
	for _, args := range [][]string{{"wal", "verify"}, {"status"}, {"recover"}, {"rebuild"}, {"feedback", "add", "--notes", "x"}} {
		code, out, errOut := cli(t, append(args, "--home", h.Dir)...)
		if code != exitCorrupt || !strings.Contains(out+errOut, wal.ReasonAckedCut) || !strings.Contains(out+errOut, "recover --salvage --apply") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if fi, _ := os.Stat(seg); fi.Size() != size {
		t.Fatalf("a refused command changed the segment: %d bytes, want %d", fi.Size(), size)
	}
	if _, err := engine.Open(context.Background(), engine.Options{Home: h}); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("engine.Open: %v", err)
	}
	code, out, errOut := cli(t, "recover", "--salvage", "--apply", "--json", "--home", h.Dir)
	if code != 0 {
		t.Fatalf("salvage: exit %d\n%s%s", code, out, errOut)
	}
	var plan struct {
		Salvaged []struct {
			Seq   uint64 `json:"seq"`
			Where string `json:"where"`
		} `json:"salvaged"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Salvaged) != 1 || plan.Salvaged[0].Seq != cut {
		t.Fatalf("salvaged %+v (%v), want seq %d\n%s", plan.Salvaged, err, cut, out)
	}
	if projections.ViewsStale(h) {
		t.Fatal("views still stale after the salvage's open")
	}
	for _, args := range [][]string{{"feedback", "add", "--notes", "after the salvage"}, {"wal", "verify"}, {"status"}, {"recover"}} {
		if code, out, errOut := cli(t, append(args, "--home", h.Dir)...); code != 0 {
			t.Fatalf("%v after the salvage: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// cut-1 kept, cut: the wal.repaired record of the cut, then the write.
	if got := eng.Log().LastSeq(); got != cut+1 {
		t.Fatalf("last seq %d, want %d", got, cut+1)
	}
	ev, err := eng.Log().Read(cut)
	if err != nil || ev.Type != events.TypeWalRepaired {
		t.Fatalf("seq %d: %v %v", cut, ev, err)
	}
}

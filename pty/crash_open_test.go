package pty

import (
	"slices"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/snapshot"
)

// TestOpenSetsAgreeWithTheModel: what CloseCrashed reads first, the
// blocks and shells a snapshot holds open and the log after it changes
// (openSets: the conversations' states skipped), is what the whole model
// loaded from the same snapshot and fed the same log holds open, at every
// cut of a workload of every event type (blocks begun, ended, begun
// again; shells started, reset and ended, in several conversations).
func TestOpenSetsAgreeWithTheModel(t *testing.T) {
	var evs []*events.Event
	for ev := range projections.Workload(projections.WorkloadEveryType, 3, 3000) {
		ev.Seq = uint64(len(evs) + 1)
		evs = append(evs, ev)
	}
	sawOpen, sawNone := false, false
	for cut := 0; cut <= len(evs); cut += 97 {
		md := newModel()
		for _, ev := range evs[:cut] {
			md.observe(ev)
		}
		body, err := md.encode()
		if err != nil {
			t.Fatal(err)
		}
		h := snapshot.Header{Seq: uint64(cut)}
		full := newModel()
		if err := full.Decode(h, body); err != nil {
			t.Fatal(err)
		}
		var open openSets
		if err := open.Decode(h, body); err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs[cut:min(cut+500, len(evs))] {
			full.observe(ev)
			open.Observe(ev)
			if !slices.Equal(open.blocks, full.openBlocks) || !slices.Equal(open.shells, full.openShells) {
				t.Fatalf("snapshot at %d, after seq %d: open sets %v %v, the model %v %v", cut, ev.Seq, open.blocks, open.shells, full.openBlocks, full.openShells)
			}
			if len(open.blocks)+len(open.shells) > 0 {
				sawOpen = true
			} else {
				sawNone = true
			}
		}
	}
	if !sawOpen || !sawNone {
		t.Fatalf("the workload never had something open (%v) or never nothing (%v)", sawOpen, sawNone)
	}
}

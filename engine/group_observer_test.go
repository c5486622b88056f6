package engine

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// groupRecorder records the groups a GroupObserver is given.
type groupRecorder struct {
	mu     sync.Mutex
	groups [][]uint64
}

func (g *groupRecorder) Observe(ev *events.Event) {
	g.mu.Lock()
	g.groups = append(g.groups, []uint64{ev.Seq})
	g.mu.Unlock()
}

func (g *groupRecorder) ObserveGroup(evs []*events.Event) {
	var seqs []uint64
	for _, ev := range evs {
		seqs = append(seqs, ev.Seq)
	}
	g.mu.Lock()
	g.groups = append(g.groups, seqs)
	g.mu.Unlock()
}

// TestGroupObserverTakesAnAppendWhole: the events of one Append (a
// terminal block's prompt and its END) reach a GroupObserver in one call,
// so it can apply them under one lock; before, each was observed alone and
// a waiter woken by the prompt could read the block still running
// (TestPromptWaitNeverOlderThanBlock failed so in CI).
func TestGroupObserverTakesAnAppendWhole(t *testing.T) {
	e := openTest(t, home.Home{Dir: filepath.Join(t.TempDir(), "home")})
	defer e.Close()
	g := &groupRecorder{}
	if err := e.Subscribe(g); err != nil {
		t.Fatal(err)
	}
	conv := "pty:c1"
	blk := events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "true", Status: events.BlockCompleted}
	seqs := mustAppend(t, e, events.MustNew(conv, &events.PtyPrompt{PromptTS: 1, Cwd: "/", BlockID: "blk_1", Line: "p\n"}),
		events.MustNew(conv, &events.PtyBlockEnd{Block: blk}))
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.groups) != 1 || len(g.groups[0]) != 2 || g.groups[0][0] != seqs[0] || g.groups[0][1] != seqs[1] {
		t.Fatalf("groups observed %v, want one group of seqs %v", g.groups, seqs)
	}
}

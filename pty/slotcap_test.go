package pty_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// TestShellCapUnderConcurrentStarts (issue 27 item 11): with MaxShells 8,
// 64 concurrent exec_blocks in 64 conversations once started 12 shells:
// the cap was checked and taken in two steps. Exactly 8 shells may start
// (the log's pty.session.started events) and every other request is
// refused (429/503 with the too-many-shells error), never queued past it.
func TestShellCapUnderConcurrentStarts(t *testing.T) {
	const maxShells, clients = 8, 64
	b := newBridgeOpts(t, pty.Options{MaxShells: maxShells, IdleTimeout: -1})
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := b.call("POST", fmt.Sprintf("/api/pty/c%d/exec_block", i), "", map[string]any{"cmd": "true"})
			codes[i] = code
		}()
	}
	wg.Wait()
	b.barrier()
	started, ok := 0, 0
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == events.TypePtySessionStarted {
			started++
		}
	}
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	if started != maxShells || ok != maxShells {
		t.Fatalf("%d shells started, %d execs accepted; want exactly %d of each (codes %v)", started, ok, maxShells, codes)
	}
	if n := len(b.slots()); n != maxShells {
		t.Fatalf("%d shells listed, want %d", n, maxShells)
	}
}

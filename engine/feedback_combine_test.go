package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// The combiner queues the next feedback group while the log still holds
// the one before (fsynced and being projected), and answers each append
// only once its own group is durable and projected, in log order; an
// fsync fault of the second group fails that group alone, the first having
// been made durable before it.
func TestFeedbackGroupsPipelined(t *testing.T) {
	for _, tc := range []struct {
		name      string
		syncFault bool
	}{{"both durable", false}, {"fsync of the second fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := home.Home{Dir: t.TempDir()}
			queued := make(chan int, 16)
			faults := &wal.Faults{}
			e, err := Open(context.Background(), Options{Home: h, Now: fixedClock(), Faults: faults,
				feedbackQueued: func(n int) { queued <- n }})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			a, b := feedbackEvent("fb_a"), feedbackEvent("fb_b")
			inApply, release := make(chan struct{}), make(chan struct{})
			var releaseOnce sync.Once
			releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
			defer releaseAll() // before Close, also when the test fails
			e.Subscribe(ObserverFunc(func(ev *events.Event) {
				if ev == a {
					close(inApply)
					<-release // holds the syncer: A's group is fsynced, not yet answered
				}
			}))
			type result struct {
				seqs []uint64
				err  error
			}
			appendAsync := func(ev *events.Event) chan result {
				c := make(chan result, 1)
				go func() {
					seqs, err := e.Append(context.Background(), ev)
					c <- result{seqs, err}
				}()
				return c
			}
			waitQueued := func(what string) {
				t.Helper()
				select {
				case <-queued:
				case <-time.After(20 * time.Second):
					t.Fatalf("%s was not queued to the log while the group before it was in flight", what)
				}
			}
			resA := appendAsync(a)
			waitQueued("A")
			<-inApply
			resB := appendAsync(b)
			waitQueued("B")
			select {
			case r := <-resA:
				t.Fatalf("A answered (%v) before its group was projected", r)
			case r := <-resB:
				t.Fatalf("B answered (%v) before its group was fsynced", r)
			default:
			}
			if tc.syncFault {
				faults.FailSync(syscall.EIO) // the next fsync is B's group's
			}
			releaseAll()
			ra, rb := <-resA, <-resB
			if ra.err != nil {
				t.Fatalf("A: %v", ra.err)
			}
			if tc.syncFault {
				if !errors.Is(rb.err, wal.ErrFailed) {
					t.Fatalf("B after a failed fsync: seqs %v, err %v; want ErrFailed", rb.seqs, rb.err)
				}
				if got := viewFeedbackIDs(t, h); len(got) != 1 || got[0] != "fb_a" {
					t.Fatalf("feedback.jsonl ids %v, want only fb_a", got)
				}
				return
			}
			if rb.err != nil {
				t.Fatalf("B: %v", rb.err)
			}
			if rb.seqs[0] <= ra.seqs[0] {
				t.Fatalf("B got seq %d, A %d: out of order", rb.seqs[0], ra.seqs[0])
			}
			if got := viewFeedbackIDs(t, h); len(got) != 2 || got[0] != "fb_a" || got[1] != "fb_b" {
				t.Fatalf("feedback.jsonl ids %v, want fb_a, fb_b", got)
			}
		})
	}
}

// viewFeedbackIDs lists the ids of the lines of feedback.jsonl, in order.
func viewFeedbackIDs(t *testing.T, h home.Home) []string {
	t.Helper()
	b, err := os.ReadFile(h.FeedbackFile())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range bytes.Lines(b) {
		var e struct{ ID string }
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("feedback.jsonl line %q: %v", line, err)
		}
		out = append(out, e.ID)
	}
	return out
}

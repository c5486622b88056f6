package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Pipelined groups meet another program appending complete lines to
// feedback.jsonl at any moment (before a group's check, between its check
// and its projection, during another group's): every line, ours and
// theirs, is in the file once, every foreign line is ingested once, and a
// rebuild from the log reproduces the file.
func TestFeedbackPipelineWithForeignWriter(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e, err := Open(ctx, Options{Home: h, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, feedbackEvent("fb_first")) // feedback.jsonl exists
	const appenders, each, foreign = 16, 40, 120
	var wg sync.WaitGroup
	errs := make(chan error, appenders+1)
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := e.Append(ctx, feedbackEvent(fmt.Sprintf("fb_%d_%d", a, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	appendersDone := make(chan struct{})
	go func() { wg.Wait(); close(appendersDone) }()
	var fw sync.WaitGroup
	fw.Add(1)
	go func() {
		defer fw.Done()
		f, err := os.OpenFile(h.FeedbackFile(), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			errs <- err
			return
		}
		defer f.Close()
		for i := range foreign {
			// One write per complete line (never an unfinished one), one
			// every few commits of the log, so that some groups find
			// foreign lines at their check and some are pipelined.
			if _, err := fmt.Fprintf(f, "{\"id\":\"cm_%d\"}\n", i); err != nil {
				errs <- err
				return
			}
			for range i % 4 {
				select {
				case <-e.Log().Changed():
				case <-appendersDone:
				}
			}
		}
	}()
	<-appendersDone
	fw.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The last foreign lines may still be past the log's end: one more
	// feedback append ingests them ahead of itself.
	mustAppend(t, e, feedbackEvent("fb_last"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, id := range viewFeedbackIDs(t, h) {
		count[id]++
	}
	if len(count) != appenders*each+foreign+2 {
		t.Errorf("feedback.jsonl has %d distinct ids, want %d", len(count), appenders*each+foreign+2)
	}
	for id, n := range count {
		if n != 1 {
			t.Errorf("%s is in feedback.jsonl %d times", id, n)
		}
	}
	seen := map[string]bool{}
	for _, raw := range ingested(t, h) {
		if seen[raw] {
			t.Errorf("%s ingested twice", raw)
		}
		seen[raw] = true
	}
	if len(seen) != foreign {
		t.Errorf("%d foreign lines ingested, want %d", len(seen), foreign)
	}
	rebuildAndCompare(t, h)
}

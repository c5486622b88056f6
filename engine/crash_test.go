package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

const crashChildEnv = "CMLAB_ENGINE_CRASH_CHILD"

// TestCrashChild is the child of TestCrashAtRandomMoments: it appends a
// workload with frequent checkpoints until it is killed.
func TestCrashChild(t *testing.T) {
	dir := crashchild.Role(t, crashChildEnv, "TestCrashAtRandomMoments")
	seed, _ := strconv.ParseUint(os.Getenv(crashChildEnv+"_SEED"), 10, 64)
	e, err := Open(context.Background(), Options{Home: home.Home{Dir: dir}, CheckpointEvery: 1 + int(seed%7), CheckpointInterval: 3 * time.Millisecond})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	rng := rand.New(rand.NewPCG(seed, 2))
	var batch []*events.Event
	for ev := range projections.Workload(projections.WorkloadEveryType, seed, 1_000_000) {
		batch = append(batch, ev)
		if len(batch) >= 1+rng.IntN(6) {
			if _, err := e.Append(context.Background(), batch...); err != nil {
				fmt.Println("append:", err)
				os.Exit(4)
			}
			batch = nil
		}
	}
	os.Exit(0)
}

// TestCrashAtRandomMoments SIGKILLs a child at random moments between
// append, projection and checkpoint; after each kill the home is reopened
// (catch-up) and every view must equal a fresh rebuild from the log, with
// no feedback line twice. The same home accumulates all rounds.
func TestCrashAtRandomMoments(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("child")
	}
	h := home.Home{Dir: t.TempDir()}
	rounds := 24
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	behind := 0 // rounds whose kill left events after the checkpoint
	for round := 0; round < rounds; round++ {
		child := crashchild.StartPiped(t, "TestCrashChild", crashChildEnv+"="+h.Dir, fmt.Sprintf("%s_SEED=%d", crashChildEnv, 1000+round))
		if round%3 == 2 {
			// Without waiting for "ready": the kill may land in the child's
			// own catch-up, its first checkpoint or its feedback ingestion.
			time.Sleep(time.Duration(20+rng.IntN(200)) * time.Millisecond)
		} else {
			if line, _ := child.Line(); line != "ready" {
				child.Stop()
				t.Fatalf("round %d: child did not get ready: %q: %s", round, line, child.Output())
			}
			time.Sleep(time.Duration(rng.IntN(120)) * time.Millisecond) // the random moment
		}
		child.Kill(t)

		if cp, _ := projections.ReadCheckpoint(h); cp != nil {
			r, _ := wal.OpenReader(h.WALDir())
			if last, _ := r.LastSeq(); last > cp.Seq {
				behind++
			}
		}
		e, err := Open(context.Background(), Options{Home: h})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		rebuildAndCompare(t, h)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		assertNoFeedbackTwice(t, h)
	}
	r := 0
	fb, _ := os.ReadFile(viewPath(h, projections.FeedbackView))
	r = bytes.Count(fb, []byte("\n"))
	t.Logf("%d rounds (%d left events past the checkpoint), feedback.jsonl has %d lines", rounds, behind, r)
	if behind == 0 {
		t.Error("no kill landed between append and checkpoint; the test proves nothing")
	}
}

// assertNoFeedbackTwice checks that every projected feedback entry (they
// carry unique ids per event) appears once.
func assertNoFeedbackTwice(t *testing.T, h home.Home) {
	t.Helper()
	b, err := os.ReadFile(viewPath(h, projections.FeedbackView))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if !bytes.HasPrefix(line, []byte(`{"schemaVersion"`)) {
			continue // an ingested foreign line
		}
		if j, dup := seen[string(line)]; dup {
			t.Fatalf("feedback line %d repeats line %d: %s", i+1, j+1, line)
		}
		seen[string(line)] = i
	}
}

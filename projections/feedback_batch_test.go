package projections

import (
	"fmt"
	"os"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// TestFeedbackBatchWritesAsLineByLine: feedback lines applied as one
// batch (written together, feedback_batch.go) leave the same bytes and
// the same running CRC as the same events applied one at a time,
// with foreign lines (another program's, appended between batches) and a
// non-feedback event inside the batch; a foreign line present when the
// batch is written is adopted as line by line would.
func TestFeedbackBatchWritesAsLineByLine(t *testing.T) {
	var evs []*events.Event
	seq := uint64(0)
	mk := func(p events.Payload) *events.Event {
		seq++
		ev := events.MustNew("lab_x", p)
		ev.Seq = seq
		return ev
	}
	for i := range 12 {
		evs = append(evs, mk(&events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%d", i), SessionID: "lab_x", Notes: "n"}}))
		if i == 5 {
			evs = append(evs, mk(&events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: "run_1", Topic: "t"}}))
		}
	}
	foreign := func(h home.Home, n int) {
		f, err := os.OpenFile(h.FeedbackFile(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "{\"id\":\"cm_%d\"}\n", n)
		f.Close()
	}
	run := func(batch int) (string, uint32, []ForeignLine) {
		h := home.Home{Dir: t.TempDir()}
		p, err := Open(Options{Home: h, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		applyBatches(t, p, evs[:7], batch)
		foreign(h, 1) // between batches
		applyBatches(t, p, evs[7:], batch)
		got := p.TakeAdopted()
		crc := p.crcs[FeedbackView].crc
		if err := p.CloseNoCheckpoint(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(h.FeedbackFile())
		if err != nil {
			t.Fatal(err)
		}
		return string(b), crc, got
	}
	one, crcOne, fOne := run(1)
	if crcOne == 0 {
		t.Fatal("no running CRC of feedback.jsonl")
	}
	for _, batch := range []int{4, 7, 50} {
		all, crcAll, fAll := run(batch)
		if all != one {
			t.Fatalf("batches of %d wrote\n%s\none at a time\n%s", batch, all, one)
		}
		if crcAll != crcOne {
			t.Fatalf("batches of %d: CRC %08x, one at a time %08x", batch, crcAll, crcOne)
		}
		if fmt.Sprint(fAll) != fmt.Sprint(fOne) || len(fOne) != 1 {
			t.Fatalf("foreign lines adopted: batches of %d %v, one at a time %v", batch, fAll, fOne)
		}
	}
}

package projections

import (
	"fmt"
	"hash/crc32"
	"os"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// labEvents makes events of Lab session lab_x numbered 1, 2, 3… as the
// log would.
func labEvents() func(events.Payload) *events.Event {
	seq := uint64(0)
	return func(p events.Payload) *events.Event {
		seq++
		ev := events.MustNew("lab_x", p)
		ev.Seq = seq
		return ev
	}
}

// TestFeedbackBatchWritesAsLineByLine: feedback lines applied as one
// batch (written together, feedback_batch.go) leave the same bytes and
// the same running CRC as the same events applied one at a time,
// with foreign lines (another program's, appended between batches) and a
// non-feedback event inside the batch; a foreign line present when the
// batch is written is adopted as line by line would.
func TestFeedbackBatchWritesAsLineByLine(t *testing.T) {
	var evs []*events.Event
	mk := labEvents()
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

// TestFeedbackWritesAreAccounted: each way a line reaches feedback.jsonl
// past the view's buffered writer — a batch at the end, a line after
// another program's, another program's line ingested where it lies —
// leaves the projector's size and running CRC equal to the file's and
// owes the file an fsync at the next checkpoint.
func TestFeedbackWritesAreAccounted(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	p, err := Open(Options{Home: h, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.CloseNoCheckpoint()
	mk := labEvents()
	fb := func(id string) *events.Event {
		return mk(&events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: id, SessionID: "lab_x"}})
	}
	appendForeign := func(line string) int64 {
		f, err := os.OpenFile(h.FeedbackFile(), os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	check := func(what string) {
		t.Helper()
		b, err := os.ReadFile(h.FeedbackFile())
		if err != nil {
			t.Fatal(err)
		}
		if got := p.sizes[FeedbackView]; got != int64(len(b)) {
			t.Errorf("%s: size %d, the file holds %d bytes", what, got, len(b))
		}
		if c, ok := p.crcs[FeedbackView]; !ok || c.size != int64(len(b)) || c.crc != crc32.Checksum(b, castagnoli) {
			t.Errorf("%s: running CRC %+v (known %v), the file's %08x", what, c, ok, crc32.Checksum(b, castagnoli))
		}
		if !p.unsync[FeedbackView] {
			t.Errorf("%s: feedback.jsonl written but no fsync owed", what)
		}
		clear(p.unsync) // as a checkpoint does
	}
	applyBatches(t, p, []*events.Event{fb("fb_1"), fb("fb_2"), fb("fb_3")}, 3)
	check("a batch at the end")
	appendForeign("{\"id\":\"cm_1\"}\n")
	applyBatches(t, p, []*events.Event{fb("fb_4")}, 1)
	check("a line after another program's")
	raw := "{\"id\":\"cm_2\"}"
	at := appendForeign(raw + "\n")
	applyBatches(t, p, []*events.Event{mk(&events.FeedbackIngested{Raw: []byte(raw), Offset: at})}, 1)
	check("another program's line ingested where it lies")
}

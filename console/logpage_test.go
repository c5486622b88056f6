package console

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// testLog writes n feedback events (every 10th with request id req-N)
// into a log of small segments and returns its directory.
func testLog(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := wal.Open(wal.Options{Dir: dir, QuarantineDir: filepath.Join(filepath.Dir(dir), "q"), NoSync: true, SegmentSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		var p events.Payload = &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%d", i), Notes: "n"}}
		stream := "lab_t"
		if i%7 == 0 {
			p = &events.MandateCancelled{MandateID: fmt.Sprintf("m%d", i%3), Reason: fmt.Sprintf("fb_%d", i-1)}
			stream = fmt.Sprintf("m%d", i%3)
		}
		ev := events.MustNew(stream, p)
		if i%10 == 0 {
			ev.WithRequest(fmt.Sprintf("req-%d", i), "rh", []byte(`{"ok":true}`))
		}
		if _, err := l.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageAll follows Next from the newest page to the log's start and returns
// the seqs seen, in order.
func pageAll(t *testing.T, lr *LogReader, last uint64, q LogQuery) ([]uint64, int) {
	t.Helper()
	var seqs []uint64
	pages := 0
	for {
		p, err := lr.Page(context.Background(), 1, last, q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range p.Events {
			if e.Checksum != "ok" {
				t.Fatalf("seq %d: checksum %q", e.Seq, e.Checksum)
			}
			seqs = append(seqs, e.Seq)
		}
		if p.Next == 0 {
			return seqs, pages
		}
		if q.Before != 0 && p.Next >= q.Before {
			t.Fatalf("page before %d goes on at %d: no progress", q.Before, p.Next)
		}
		q.Before = p.Next
		if pages > 10000 {
			t.Fatal("paging does not end")
		}
	}
}

// TestLogPages: following Next from the newest page lists every event
// exactly once, newest first, with and without filters, and with a budget
// so small that every page is cut (each still makes progress).
func TestLogPages(t *testing.T) {
	const n = 3000
	dir := testLog(t, n)
	segs, err := wal.Segments(dir)
	if err != nil || len(segs) < 10 {
		t.Fatalf("want many segments, got %d (%v)", len(segs), err)
	}
	lr := NewLogReader(dir)
	want := func(keep func(i int) bool) []uint64 {
		var out []uint64
		for i := n; i >= 1; i-- {
			if keep(i) {
				out = append(out, uint64(i))
			}
		}
		return out
	}
	cases := []struct {
		name string
		q    LogQuery
		keep func(i int) bool
	}{
		{"all", LogQuery{}, func(int) bool { return true }},
		{"type", LogQuery{TypePrefix: "mandate."}, func(i int) bool { return i%7 == 0 }},
		{"mandate", LogQuery{Mandate: "m1"}, func(i int) bool { return i%7 == 0 && i%3 == 1 }},
		{"req", LogQuery{Req: "req-2990"}, func(i int) bool { return i == 2990 }},
		// fb_699 is the feedback's id and named in the cancel after it.
		{"id", LogQuery{IDs: []string{"fb_699"}}, func(i int) bool { return i == 699 || i == 700 }},
		{"tiny budget", LogQuery{Budget: time.Nanosecond, Limit: 200}, func(int) bool { return true }},
		{"tiny budget, rare", LogQuery{Budget: time.Nanosecond, TypePrefix: "mandate."}, func(i int) bool { return i%7 == 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, pages := pageAll(t, lr, n, c.q)
			w := want(c.keep)
			seen := map[uint64]int{}
			for i, g := range got {
				if j, dup := seen[g]; dup {
					t.Errorf("seq %d at %d and %d", g, j, i)
				}
				seen[g] = i
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Fatalf("got %d seqs %v…, want %d %v…", len(got), head(got), len(w), head(w))
			}
			if c.q.Budget == time.Nanosecond && pages < n/budgetEvery {
				t.Fatalf("a 1 ns budget cut only %d pages", pages)
			}
		})
	}
	// A jump: the page before seq 1501 starts at 1500.
	p, err := lr.Page(context.Background(), 1, n, LogQuery{Before: 1501, Limit: 3})
	if err != nil || len(p.Events) != 3 || p.Events[0].Seq != 1500 || p.Events[2].Seq != 1498 || p.Next != 1498 {
		t.Fatalf("jump: %+v %v", p, err)
	}
	if e := p.Events[0]; e.Type != "feedback.submitted" || e.Size == 0 || e.Segment == "" || e.Offset < 0 {
		t.Fatalf("event %+v", e)
	}
}

// TestLogPageShowsDamage: a flipped byte in a sealed segment is shown as
// that event's checksum verdict, not an error of the page.
func TestLogPageShowsDamage(t *testing.T) {
	dir := testLog(t, 400)
	lr := NewLogReader(dir)
	p, err := lr.Page(context.Background(), 1, 400, LogQuery{Before: 201, Limit: 1})
	if err != nil || len(p.Events) != 1 {
		t.Fatal(p, err)
	}
	e := p.Events[0]
	path := filepath.Join(dir, e.Segment)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[e.Offset+int64(e.Size)-2] ^= 0x40 // inside the envelope: the CRC no longer holds
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = lr.Page(context.Background(), 1, 400, LogQuery{Before: 202, Limit: 3})
	if err != nil || len(p.Events) != 3 {
		t.Fatal(p, err)
	}
	if p.Events[0].Checksum != "ok" || p.Events[1].Seq != 200 || p.Events[1].Checksum == "ok" || p.Events[2].Checksum != "ok" {
		t.Fatalf("verdicts %q %q %q", p.Events[0].Checksum, p.Events[1].Checksum, p.Events[2].Checksum)
	}
	t.Logf("seq 200: %s", p.Events[1].Checksum)
}

func head(s []uint64) []uint64 { return s[:min(len(s), 8)] }

// TestLogPageSeesAppends: pages read while the log is written see every
// event appended since the last page — in the active segment (its kept
// frame offsets framed on from where they ended, over preallocated
// zeros) and in segments created since (the kept list of segments read
// again) — in order, each once.
func TestLogPageSeesAppends(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := wal.Open(wal.Options{Dir: dir, QuarantineDir: filepath.Join(filepath.Dir(dir), "q"), NoSync: true, SegmentSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lr := NewLogReader(dir)
	for round := 1; round <= 40; round++ {
		for i := 0; i < round*3+2; i++ {
			ev := events.MustNew("lab_t", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%d_%d", round, i), Notes: "n"}})
			if _, err := l.Append(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
		}
		last := l.LastSeq()
		p, err := lr.Page(context.Background(), 1, last, LogQuery{Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) != 4 || p.Events[0].Seq != last || p.Events[3].Seq != last-3 || p.Events[0].Checksum != "ok" {
			t.Fatalf("round %d: newest page of %d events: %+v", round, last, p.Events)
		}
	}
	last := l.LastSeq()
	seqs, _ := pageAll(t, lr, last, LogQuery{Limit: 37})
	if uint64(len(seqs)) != last || seqs[0] != last || seqs[len(seqs)-1] != 1 {
		t.Fatalf("%d seqs of %d: %v…", len(seqs), last, head(seqs))
	}
	for i, s := range seqs {
		if s != last-uint64(i) {
			t.Fatalf("seq %d at %d", s, i)
		}
	}
}

// TestLogIndexFramesOnInParts: a segment larger than one framing chunk
// framed by calls whose deadline has passed is framed one chunk a call,
// each part kept and framed on by the next call, until the offsets are
// those of the whole segment; pages then list every event once.
func TestLogIndexFramesOnInParts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := wal.Open(wal.Options{Dir: dir, QuarantineDir: filepath.Join(filepath.Dir(dir), "q"), NoSync: true, SegmentSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12000
	notes := string(make([]byte, 200))
	for i := 1; i <= n; i++ {
		ev := events.MustNew("s", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%d", i), Notes: notes}})
		if _, err := l.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := wal.Segments(dir)
	if err != nil || segs[0].Size < 3*indexChunk {
		t.Fatalf("want a segment of several chunks: %+v %v", segs, err)
	}
	f, err := os.Open(filepath.Join(dir, segs[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	whole, _, err := NewLogReader(dir).index(f, segs[0].Name, 1, nil, time.Time{})
	if err != nil || whole.cut || whole.end != segs[0].Size {
		t.Fatalf("whole: cut %v, end %d of %d, %v", whole.cut, whole.end, segs[0].Size, err)
	}
	lr := NewLogReader(dir)
	past := time.Now().Add(-time.Hour)
	calls := 0
	for {
		calls++
		x, _, err := lr.index(f, segs[0].Name, 1, nil, past)
		if err != nil {
			t.Fatal(err)
		}
		if !x.cut {
			if fmt.Sprint(x.offs) != fmt.Sprint(whole.offs) || x.end != whole.end {
				t.Fatalf("framed in parts: %d offsets ending at %d, whole: %d at %d", len(x.offs), x.end, len(whole.offs), whole.end)
			}
			break
		}
		if calls > 100 {
			t.Fatal("framing in parts does not end")
		}
	}
	if want := int((segs[0].Size + indexChunk - 1) / indexChunk); calls < want-1 {
		t.Fatalf("%d calls framed %d bytes: not one chunk a call", calls, segs[0].Size)
	}
	seqs, _ := pageAll(t, lr, n, LogQuery{Limit: 173})
	if len(seqs) != n || seqs[0] != n || seqs[n-1] != 1 {
		t.Fatalf("%d seqs %v…", len(seqs), head(seqs))
	}
}

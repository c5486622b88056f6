package retention

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/snapshot"
	"github.com/cmlab/cmlab/wal"
)

func hash(c byte) string { return "sha256-" + strings.Repeat(string(c), 64) }

// history appends a mix of step transitions, terminal blocks and filler
// events to a new home (small segments, a clock one second per event)
// and returns it closed. Rounds of the mix repeat n times.
func history(t *testing.T, n int) home.Home {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	clock := time.UnixMilli(1_700_000_000_000)
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 64 << 10, NoSync: true,
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	appendMix(t, eng, 0, n)
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

func appendMix(t *testing.T, eng *engine.Engine, from, n int) {
	t.Helper()
	ctx := context.Background()
	add := func(stream string, p events.Payload) {
		t.Helper()
		if _, err := eng.Append(ctx, events.MustNew(stream, p)); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < from+n; i++ {
		m := fmt.Sprintf("m%d", i)
		add(m, &events.StepPlanned{MandateID: m, Steps: []events.PlannedStep{
			{StepID: "a", Tool: "sh", ParamsHash: hash('1'), IdemKey: "k" + m + "a"},
			{StepID: "b", Tool: "sh", ParamsHash: hash('2'), IdemKey: "k" + m + "b"},
		}})
		add(m, &events.StepExecuting{MandateID: m, StepID: "a", ObservedPreHash: hash('3')})
		add(m, &events.StepCompleted{MandateID: m, StepID: "a", PostHash: hash('4'), ResultHash: hash('5')})
		switch i % 4 {
		case 0: // b awaits review
			add(m, &events.StepNeedsReview{MandateID: m, StepID: "b", Reason: "operator"})
		case 1: // b failed, then reset: open again
			add(m, &events.StepFailed{MandateID: m, StepID: "b", ErrorClass: "exit_status"})
			add(m, &events.StepReset{MandateID: m, StepID: "b", Reason: "retry"})
		case 2: // closed
			add(m, &events.StepFailed{MandateID: m, StepID: "b", ErrorClass: "exit_status"})
		case 3: // an orphan step of another mandate
			add("other", &events.StepExecuting{MandateID: "orphan" + m, StepID: "z", ObservedPreHash: hash('6')})
		}
		conv := fmt.Sprintf("c%d", i%3)
		blk := fmt.Sprintf("blk_%d", i)
		add(conv, &events.PtyBlockBegin{Block: events.Block{BlockID: blk, Cmd: "echo " + blk, Mode: "block", Status: "running"}})
		if i%5 != 0 {
			add(conv, &events.PtyBlockEnd{Block: events.Block{BlockID: blk, Status: "done"}})
		}
		for j := range 30 {
			add("lab", &events.LabSessionStarted{SessionID: fmt.Sprintf("lab_%d_%d", i, j), Version: "test"})
		}
	}
}

// replayAll is the model of the whole log of h, no snapshot.
func replayAll(t *testing.T, h home.Home) *Model {
	t.Helper()
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		m.Observe(ev)
	}
	return m
}

func sameModel(t *testing.T, got, want *Model) {
	t.Helper()
	if got.seq != want.seq || got.eventID != want.eventID {
		t.Fatalf("covers %d %s, want %d %s", got.seq, got.eventID, want.seq, want.eventID)
	}
	if !reflect.DeepEqual(got.st, want.st) {
		t.Fatalf("models differ:\n got %+v\nwant %+v", got.st, want.st)
	}
	if !reflect.DeepEqual(got.AwaitingReview(), want.AwaitingReview()) || !reflect.DeepEqual(got.OpenBlocks(), want.OpenBlocks()) ||
		got.OldestOpenStep() != want.OldestOpenStep() || got.OldestOpenBlock() != want.OldestOpenBlock() {
		t.Fatalf("answers differ")
	}
}

// snapshotAt writes the snapshot of the first seq events of h's log.
func snapshotAt(t *testing.T, h home.Home, seq uint64) {
	t.Helper()
	r, _ := wal.OpenReader(h.WALDir())
	m := New()
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq > seq {
			break
		}
		m.Observe(ev)
	}
	if ok, err := m.WriteSnapshot(SnapshotFile(h), 0); !ok || err != nil {
		t.Fatalf("snapshot not written: %v %v", ok, err)
	}
}

func TestModelAnswers(t *testing.T) {
	h := history(t, 8)
	m := replayAll(t, h)
	// m0, m4 await review on b; m1, m5 reset b (open); m3, m7 orphans executing.
	if got := strings.Join(m.AwaitingReview(), " "); got != "m0/b m4/b" {
		t.Fatalf("awaiting review: %q", got)
	}
	var ids []string
	for _, b := range m.OpenBlocks() {
		ids = append(ids, b.ConversationID+":"+b.Block.BlockID+":"+b.Block.Cmd)
	}
	if got := strings.Join(ids, " "); got != "c0:blk_0:echo blk_0 c2:blk_5:echo blk_5" {
		t.Fatalf("open blocks: %q", got)
	}
	// The oldest open mandate is m0 (b in review), planned at seq 1.
	if m.OldestOpenStep() != 1 || m.OldestOpenBlock() == 0 {
		t.Fatalf("oldest open step %d, block %d", m.OldestOpenStep(), m.OldestOpenBlock())
	}
	// The same as pty's own scan of the log.
	r, _ := wal.OpenReader(h.WALDir())
	lo, err := pty.ScanLeftOpen(r.Events(1))
	if err != nil || !reflect.DeepEqual(lo.Blocks, m.OpenBlocks()) {
		t.Fatalf("pty.ScanLeftOpen %+v %v, model %+v", lo.Blocks, err, m.OpenBlocks())
	}
}

// TestLoadSnapshotAndTail: Load = the snapshot + the log after its seq,
// equal to a replay of the whole log; it reads only the tail.
func TestLoadSnapshotAndTail(t *testing.T) {
	h := history(t, 12)
	want := replayAll(t, h)
	at := want.seq - 57
	snapshotAt(t, h, at)
	m, info, err := Load(h)
	if err != nil {
		t.Fatal(err)
	}
	if info.Refused != "" || info.SnapshotSeq != at || info.Read != 57 || info.Last != want.seq {
		t.Fatalf("load: %+v (snapshot at %d, last %d)", info, at, want.seq)
	}
	sameModel(t, m, want)
	// Snapshot at the end: nothing read.
	snapshotAt(t, h, want.seq)
	if m, info, err = Load(h); err != nil || info.Read != 0 || info.SnapshotSeq != want.seq {
		t.Fatalf("load at the end: %+v %v", info, err)
	}
	sameModel(t, m, want)
}

// TestLoadEarlySegmentsUnreadable: with a snapshot, the log before it is
// never read: garbling every segment but the last two changes nothing.
func TestLoadEarlySegmentsUnreadable(t *testing.T) {
	h := history(t, 40)
	want := replayAll(t, h)
	snapshotAt(t, h, want.seq-3)
	segs, err := wal.Segments(h.WALDir())
	if err != nil || len(segs) < 4 {
		t.Fatalf("%d segments: %v", len(segs), err)
	}
	for _, s := range segs[:len(segs)-2] {
		p := filepath.Join(h.WALDir(), s.Name)
		fi, _ := os.Stat(p)
		if err := os.WriteFile(p, []byte(strings.Repeat("\xa5", int(fi.Size()))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := replayAllErr(h); err == nil {
		t.Fatal("the garbled log still reads from seq 1: the test proves nothing")
	}
	m, info, err := Load(h)
	if err != nil || info.Read != 3 {
		t.Fatalf("load: %+v %v", info, err)
	}
	sameModel(t, m, want)
}

func replayAllErr(h home.Home) (int, error) {
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, err := range r.Events(1) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// TestLoadRefusesUntrustedSnapshot: a missing, truncated, garbled, other
// version's or other log's snapshot is never trusted: the model is rebuilt
// from the log (and Load says why, but for a missing file).
func TestLoadRefusesUntrustedSnapshot(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string){
		"missing":   func(t *testing.T, path string) { os.Remove(path) },
		"truncated": func(t *testing.T, path string) { fi, _ := os.Stat(path); os.Truncate(path, fi.Size()/2) },
		"empty":     func(t *testing.T, path string) { os.Truncate(path, 0) },
		"garbled": func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			for i := len(b) / 3; i < len(b)/3+8; i++ {
				b[i] ^= 0xff
			}
			os.WriteFile(path, b, 0o600)
		},
		"other version": func(t *testing.T, path string) {
			hd, body, _ := snapshot.Read(path, ModelName, Version())
			hd.Version = "0/old"
			snapshot.Write(path, hd, body)
		},
		"past the log": func(t *testing.T, path string) {
			hd, body, _ := snapshot.Read(path, ModelName, Version())
			hd.Seq += 1000
			snapshot.Write(path, hd, body)
		},
		"another event": func(t *testing.T, path string) {
			hd, body, _ := snapshot.Read(path, ModelName, Version())
			hd.EventID = "01a20000-0000-7000-8000-000000000000"
			snapshot.Write(path, hd, body)
		},
		"body not a model": func(t *testing.T, path string) {
			hd, _, _ := snapshot.Read(path, ModelName, Version())
			snapshot.Write(path, hd, []byte{0x93, 1, 2, 3})
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := history(t, 6)
			want := replayAll(t, h)
			snapshotAt(t, h, want.seq-10)
			damage(t, SnapshotFile(h))
			m, info, err := Load(h)
			if err != nil {
				t.Fatal(err)
			}
			if info.SnapshotSeq != 0 || uint64(info.Read) != want.seq {
				t.Fatalf("untrusted snapshot used: %+v", info)
			}
			if (info.Refused == "") != (name == "missing") {
				t.Fatalf("refused %q", info.Refused)
			}
			sameModel(t, m, want)
			// The daemon's path (LoadSnapshot over an open log) refuses it too.
			if name != "missing" {
				r, _ := wal.OpenReader(h.WALDir())
				if err := New().LoadSnapshot(SnapshotFile(h), 1, want.seq, ReaderIDAt(r)); err == nil {
					t.Fatal("LoadSnapshot trusted it")
				}
			}
		})
	}
}

// TestFirstTS: the timestamp index finds the same first event as a scan,
// for every cutoff, from any first retained seq.
func TestFirstTS(t *testing.T) {
	h := history(t, 260) // more than 2*TSBlock events
	m := replayAll(t, h)
	r, _ := wal.OpenReader(h.WALDir())
	var ts []int64
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, ev.TS)
	}
	last := uint64(len(ts))
	if last <= 2*TSBlock {
		t.Fatalf("only %d events", last)
	}
	for _, from := range []uint64{1, 2, TSBlock, TSBlock + 1, last - 1} {
		for _, cut := range []int64{0, ts[0], ts[TSBlock-1], ts[TSBlock], ts[last/2], ts[last-1], ts[last-1] + 1} {
			want := last + 1
			for i := from; i <= last; i++ {
				if ts[i-1] > cut {
					want = i
					break
				}
			}
			read := 0
			evs := func(from uint64) iter.Seq2[*events.Event, error] {
				return func(yield func(*events.Event, error) bool) {
					for ev, err := range r.Events(from) {
						read++
						if !yield(ev, err) {
							return
						}
					}
				}
			}
			got, err := m.FirstTS(context.Background(), evs, from, last, func(x int64) bool { return x > cut })
			if err != nil || got != want {
				t.Fatalf("from %d cut %d: %d %v, want %d", from, cut, got, err, want)
			}
			// A run's first event that matches is answered from the
			// index alone; otherwise at most one run is read.
			if want == from && firstOfRun(m, from) && read != 0 {
				t.Fatalf("from %d cut %d: read %d events for the first event of a run", from, cut, read)
			}
			if read > TSBlock+1 {
				t.Fatalf("from %d cut %d: read %d events", from, cut, read)
			}
		}
	}
	// Every event in the window: the answer is the first seq, read from
	// nothing (status on a recent home).
	n := 0
	never := func(uint64) iter.Seq2[*events.Event, error] {
		return func(func(*events.Event, error) bool) { n++ }
	}
	if got, err := m.FirstTS(context.Background(), never, 1, last, func(x int64) bool { return x > ts[0]-1 }); err != nil || got != 1 || n != 0 {
		t.Fatalf("all in the window: %d %v, %d reads", got, err, n)
	}
}

// firstOfRun reports whether seq starts a run of m's timestamp index.
func firstOfRun(m *Model, seq uint64) bool {
	for _, r := range m.st.Runs {
		if r.First == seq {
			return true
		}
	}
	return false
}

// TestModelKeepsOpenWorkOnly: completed steps and mandates whose steps
// all completed leave the model; what stays open stays.
func TestModelKeepsOpenWorkOnly(t *testing.T) {
	m := New()
	seq := uint64(0)
	obs := func(stream string, p events.Payload) {
		seq++
		ev := events.MustNew(stream, p)
		ev.Seq, ev.TS = seq, int64(seq)
		m.Observe(ev)
	}
	for i := range 1000 {
		id := fmt.Sprintf("m%d", i)
		obs(id, &events.StepPlanned{MandateID: id, Steps: []events.PlannedStep{{StepID: "a", Tool: "sh", ParamsHash: hash('1'), IdemKey: "k"}}})
		obs(id, &events.StepExecuting{MandateID: id, StepID: "a", ObservedPreHash: hash('2')})
		if i != 500 {
			obs(id, &events.StepCompleted{MandateID: id, StepID: "a", PostHash: hash('3'), ResultHash: hash('4')})
		}
	}
	if len(m.st.Mandates) != 1 || len(m.st.Keys) != 1 || m.st.Mandates["m500"] == nil || m.st.Keys["m500/a"] == nil {
		t.Fatalf("%d mandates, %d steps kept", len(m.st.Mandates), len(m.st.Keys))
	}
	if m.OldestOpenStep() != 1501 {
		t.Fatalf("oldest open step %d, want 1501 (m500's plan)", m.OldestOpenStep())
	}
}

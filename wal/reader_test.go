package wal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

func TestReaderFollowsAHeldLogAcrossSegments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: 2048})
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	written := make(chan []*events.Event, 1)
	go func() {
		var evs []*events.Event
		for i := 0; i < n; i++ {
			ev := testEvent(i)
			if _, err := l.Append(context.Background(), ev); err != nil {
				t.Error(err)
				break
			}
			evs = append(evs, ev)
		}
		written <- evs
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []*events.Event
	for ev, err := range r.Follow(ctx, 1, 5*time.Millisecond) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if len(got) == n {
			break
		}
	}
	evs := <-written
	if len(got) != n {
		t.Fatalf("followed %d events, want %d", len(got), n)
	}
	for i := range got {
		if got[i].Seq != uint64(i+1) || !bytes.Equal(entryBytes(t, got[i]), entryBytes(t, evs[i])) {
			t.Fatalf("event %d differs (seq %d)", i, got[i].Seq)
		}
	}
	last, err := r.LastSeq()
	if err != nil || last != n {
		t.Fatalf("LastSeq %d %v", last, err)
	}
	// Events from the middle, and Stat.
	c := 0
	for ev, err := range r.Events(250) {
		if err != nil || ev.Seq != uint64(250+c) {
			t.Fatalf("Events(250): %v seq %d", err, ev.Seq)
		}
		c++
	}
	if c != 51 {
		t.Fatalf("Events(250) yielded %d", c)
	}
	st, err := Stat(dir)
	if err != nil || st.Events != n || st.ByType[events.TypeWalSalvaged] != n || st.Last != n || len(st.Segments) < 10 || st.LockPID != os.Getpid() {
		t.Fatalf("Stat %+v %v", st, err)
	}
}

func TestReaderStopsBeforeTornTailAndReportsCorruption(t *testing.T) {
	home := t.TempDir()
	buildLog(t, home, 10, 700)
	dir := filepath.Join(home, "wal")
	fr := frames(t, dir)
	last := fr[len(fr)-1]
	// A torn tail: half of a frame appended.
	if err := appendToTail(dir, []byte{0xf0, 0x01, 0xC1, 0x00}); err != nil {
		t.Fatal(err)
	}
	r, _ := OpenReader(dir)
	n := 0
	for _, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 10 {
		t.Fatalf("%d events before the torn tail, want 10", n)
	}
	if ls, err := r.LastSeq(); err != nil || ls != 10 {
		t.Fatalf("LastSeq %d %v", ls, err)
	}
	// Damage before the tail is an error naming where.
	f := fr[2]
	writeAt(t, filepath.Join(dir, f.seg), int64(f.off+20), []byte{0})
	var gotErr error
	n = 0
	for _, err := range r.Events(1) {
		if err != nil {
			gotErr = err
			break
		}
		n++
	}
	if !errors.Is(gotErr, ErrCorrupt) || n != 2 {
		t.Fatalf("after %d events: %v", n, gotErr)
	}
	_ = last
}

// Damage in the last segment with good entries after it is corruption for
// a one-shot read too: the first sighting pauses a live read (a write in
// progress looks the same for an instant), and Events reads again instead
// of ending there with no error and the later entries silently missing.
func TestReaderEventsReportsDamageInTheLastSegment(t *testing.T) {
	// A log whose last segment file holds two entries (a log can end
	// in an empty segment when its last entry filled the one before).
	var dir string
	var inLast []frameLoc
	for n := 12; len(inLast) < 2; n++ {
		if n > 40 {
			t.Fatal("no log size left several entries in the last segment")
		}
		home := t.TempDir()
		buildLog(t, home, n, 700)
		dir = filepath.Join(home, "wal")
		segs, err := listSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		inLast = nil
		for _, f := range frames(t, dir) {
			if f.seg == segs[len(segs)-1].Name {
				inLast = append(inLast, f)
			}
		}
	}
	first := inLast[0]
	if first.seq < 2 {
		t.Fatalf("the last segment starts at seq %d: want earlier segments", first.seq)
	}
	seg, err := os.ReadFile(filepath.Join(dir, first.seg))
	if err != nil {
		t.Fatal(err)
	}
	at := first.off + first.len/2
	writeAt(t, filepath.Join(dir, first.seg), int64(at), []byte{seg[at] ^ 0x40})
	r, _ := OpenReader(dir)
	var gotErr error
	n := uint64(0)
	for ev, err := range r.Events(1) {
		if err != nil {
			gotErr = err
			break
		}
		n++
		if ev.Seq != n {
			t.Fatalf("event %d has seq %d", n, ev.Seq)
		}
	}
	want := fmt.Sprintf("segment %s offset %d seq %d", first.seg, first.off, first.seq)
	if !errors.Is(gotErr, ErrCorrupt) || n != first.seq-1 || !strings.Contains(gotErr.Error(), want) {
		t.Fatalf("after %d events: %v; want ErrCorrupt naming %q after %d events", n, gotErr, want, first.seq-1)
	}
}

// Lists in Verify's and Stat's reports are [] in JSON when empty, not
// null, for clients that iterate over them.
func TestReportListsAreEmptyNotNull(t *testing.T) {
	home := t.TempDir()
	buildLog(t, home, 3, 700)
	rep, err := Verify(filepath.Join(home, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"bad":[]`)) {
		t.Fatalf("verify report %s", b)
	}
	empty := filepath.Join(t.TempDir(), "wal")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := Stat(empty)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"segments":[]`)) || !bytes.Contains(b, []byte(`"by_type":{}`)) || st.Events != 0 {
		t.Fatalf("stat report %s", b)
	}
}

// A log missing its first segment is missing acknowledged entries for a
// reader too, as for Verify and Open: reading from before the first
// segment present is corruption, not a silent later start.
func TestReaderReportsAMissingFirstSegment(t *testing.T) {
	home := t.TempDir()
	buildLog(t, home, 10, 700) // segments 1-3, 4-6, 7-9, 10
	dir := filepath.Join(home, "wal")
	if err := os.Remove(filepath.Join(dir, segmentName(1))); err != nil {
		t.Fatal(err)
	}
	r, _ := OpenReader(dir)
	for _, from := range []uint64{0, 1, 3} {
		n := 0
		var got error
		for _, err := range r.Events(from) {
			if err != nil {
				got = err
				break
			}
			n++
		}
		want := "segment 00000000000000000001 offset 0 seq 1: missing entries: the log starts at seq 4"
		if n != 0 || !errors.Is(got, ErrCorrupt) || !strings.Contains(got.Error(), want) {
			t.Fatalf("Events(%d): %d events then %v, want none and %q", from, n, got, want)
		}
	}
	// Reading from a sequence the log still holds needs nothing missing.
	n := 0
	for ev, err := range r.Events(4) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if ev.Seq != uint64(3+n) {
			t.Fatalf("seq %d", ev.Seq)
		}
	}
	if n != 7 {
		t.Fatalf("Events(4): %d events, want 7", n)
	}
}

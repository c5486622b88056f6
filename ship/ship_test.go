package ship

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/replay"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats.go/jetstream"
)

// workloadHome builds a closed home holding n events of every type.
func workloadHome(t *testing.T, n int) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	e := openEngine(t, h)
	ctx := context.Background()
	evs := make([]*events.Event, 0, 64)
	for ev := range projections.Workload(projections.WorkloadEveryType, 7, n) {
		evs = append(evs, ev)
		if len(evs) == 64 {
			if _, err := e.Append(ctx, evs...); err != nil {
				t.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	if len(evs) > 0 {
		if _, err := e.Append(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// sameViews asserts that two homes' view files are identical byte for byte.
func sameViews(t *testing.T, a, b home.Home) {
	t.Helper()
	fa, err := projections.ViewFiles(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := projections.ViewFiles(b)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(fa, "\n") != strings.Join(fb, "\n") {
		t.Fatalf("view files differ:\n%v\n%v", fa, fb)
	}
	if len(fa) < 3 {
		t.Fatalf("only %d view files: %v", len(fa), fa)
	}
	for _, f := range fa {
		x, err := os.ReadFile(filepath.Join(a.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs (%d vs %d bytes)", f, len(x), len(y))
		}
	}
}

// rebuildCheck is `cmlab rebuild --check`: a rebuild from h's log equals
// h's views.
func rebuildCheck(t *testing.T, h home.Home) {
	t.Helper()
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	last, err := r.LastSeq()
	if err != nil {
		t.Fatal(err)
	}
	dst := home.Home{Dir: t.TempDir()}
	if _, err := projections.Rebuild(context.Background(), r.Events(1), dst, projections.RebuildOptions{UpTo: last, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if d, err := projections.Compare(h, dst); err != nil || d != nil {
		t.Fatalf("rebuild --check of %s: %v %v", h.Dir, d, err)
	}
}

func TestShipRestoreByteIdentical(t *testing.T) {
	n := startNATS(t)
	h := workloadHome(t, 3000)
	st := shipUntil(t, Options{Home: h, Conn: n.conn(), Poll: 5 * time.Millisecond})
	if st.Shipped != 3000 || st.Stream != DefaultStream(st.HomeID) || st.LastError != "" {
		t.Fatalf("state %+v", st)
	}
	saved, err := ReadState(h)
	if err != nil || saved.Shipped != 3000 || saved.HomeID != st.HomeID {
		t.Fatalf("state/ship.json %+v %v", saved, err)
	}
	checkStream(t, n, h, st.Stream)

	into := home.Home{Dir: filepath.Join(t.TempDir(), "restored")}
	res, err := Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: into, Key: homeKey(t, h)})
	if err != nil {
		t.Fatal(err)
	}
	if res.First != 1 || res.Last != 3000 || res.Events != 3000 {
		t.Fatalf("restored %+v", res)
	}
	if rep, err := wal.Verify(into.WALDir()); err != nil || !rep.OK() || rep.Last != 3000 || rep.TornTail != nil {
		t.Fatalf("wal verify: %+v %v", rep, err)
	}
	sameViews(t, h, into)
	rebuildCheck(t, into)
	// Entry bytes equal the original's, seq by seq.
	a, _ := wal.OpenReader(h.WALDir())
	b, _ := wal.OpenReader(into.WALDir())
	var orig [][]byte
	for ev, err := range a.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		e, _ := wal.EncodeEntry(ev)
		orig = append(orig, e)
	}
	i := 0
	for ev, err := range b.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		e, _ := wal.EncodeEntry(ev)
		if !bytes.Equal(e, orig[i]) {
			t.Fatalf("restored entry %d differs", ev.Seq)
		}
		i++
	}
	if i != len(orig) {
		t.Fatalf("restored %d entries of %d", i, len(orig))
	}
	// The restored home carries the id and a cursor at the end: a shipper
	// there goes on without republishing.
	if id, err := ReadHomeID(into); err != nil || id != st.HomeID {
		t.Fatalf("restored home id %q %v", id, err)
	}
	if rs, err := ReadState(into); err != nil || rs.Shipped != 3000 || rs.Stream != st.Stream {
		t.Fatalf("restored cursor %+v %v", rs, err)
	}
	e := openEngine(t, into)
	for i := 0; i < 10; i++ {
		if _, err := e.Append(context.Background(), feedbackEvent(1)); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()
	if st := shipUntil(t, Options{Home: into, Conn: n.conn(), Poll: 5 * time.Millisecond}); st.Shipped != 3010 {
		t.Fatalf("after restore shipped %d", st.Shipped)
	}
	checkStream(t, n, into, st.Stream)

	// Time travel over the shipped history equals a local replay --to.
	at := home.Home{Dir: filepath.Join(t.TempDir(), "at1234")}
	if _, err := Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: at, UpTo: 1234, Key: homeKey(t, h)}); err != nil {
		t.Fatal(err)
	}
	local := home.Home{Dir: filepath.Join(t.TempDir(), "local1234")}
	if _, err := replay.To(context.Background(), replay.ToOptions{Src: h, Into: local, UpTo: 1234}); err != nil {
		t.Fatal(err)
	}
	sameViews(t, local, at)
	if _, err := ReadHomeID(at); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a replayed home got the home id: %v", err)
	}
}

func TestRestoreGapNamesMissingSeqs(t *testing.T) {
	n := startNATS(t)
	h := workloadHome(t, 40)
	st := shipUntil(t, Options{Home: h, Conn: n.conn(), Poll: 5 * time.Millisecond})
	s := n.stream(t, st.Stream)
	for _, seq := range []uint64{5, 7, 8, 30} {
		if err := s.DeleteMsg(context.Background(), seq); err != nil {
			t.Fatal(err)
		}
	}
	into := home.Home{Dir: filepath.Join(t.TempDir(), "restored")}
	_, err := Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: into})
	var gap *GapError
	if !errors.As(err, &gap) || !errors.Is(err, ErrGap) {
		t.Fatalf("restore over a gap: %v", err)
	}
	if want := "lacks 4 event(s): seq 5, 7-8, 30"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if _, err := os.Stat(into.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore over a gap created %s: %v", into.Dir, err)
	}
	// Up to seq 4 the stream is whole.
	if _, err := Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: into, UpTo: 4, Key: homeKey(t, h)}); err != nil {
		t.Fatal(err)
	}
	// A purged front is missing too.
	if err := s.Purge(context.Background(), jetstream.WithPurgeSequence(20)); err != nil {
		t.Fatal(err)
	}
	_, err = Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: home.Home{Dir: t.TempDir()}})
	if want := "seq 1-19, 30"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore of a purged stream: %v (want %q)", err, want)
	}
}

func TestShipRefusesAnotherHomesStream(t *testing.T) {
	n := startNATS(t)
	a := workloadHome(t, 20)
	b := home.Home{Dir: t.TempDir()}
	e := openEngine(t, b)
	for i := 0; i < 20; i++ {
		if _, err := e.Append(context.Background(), feedbackEvent(2)); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()
	sa := shipUntil(t, Options{Home: a, Conn: n.conn(), Stream: "CMLAB", Poll: 5 * time.Millisecond})
	idB, err := EnsureHomeID(b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Home: b, Conn: n.conn(), Stream: "CMLAB", MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = s.Run(ctx)
	if !errors.Is(err, ErrOtherHome) || !strings.Contains(err.Error(), sa.HomeID) || !strings.Contains(err.Error(), idB) {
		t.Fatalf("shipping home %s into home %s's stream: %v", idB, sa.HomeID, err)
	}
	if st, _ := ReadState(b); !st.Stopped || !strings.Contains(st.LastError, sa.HomeID) || st.Shipped != 0 {
		t.Fatalf("state after refusal: %+v", st)
	}
	// Restore of b's id from a's stream is refused the same way.
	_, err = Restore(context.Background(), RestoreOptions{Conn: n.conn(), Stream: "CMLAB", HomeID: idB, Into: home.Home{Dir: t.TempDir()}})
	if !errors.Is(err, ErrOtherHome) || !strings.Contains(err.Error(), sa.HomeID) || !strings.Contains(err.Error(), idB) {
		t.Fatalf("restore of %s from %s's stream: %v", idB, sa.HomeID, err)
	}
	// A cursor written for another home id.
	if err := os.WriteFile(StateFile(b), []byte(`{"home_id":"`+sa.HomeID+`","stream":"CMLAB","shipped_seq":20}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Home: b, Conn: n.conn()})
	if !errors.Is(err, ErrOtherHome) || !strings.Contains(err.Error(), sa.HomeID) || !strings.Contains(err.Error(), idB) {
		t.Fatalf("foreign cursor: %v", err)
	}
	// A copy of home a (same id) with another history: its event 20 is
	// not the stream's.
	if err := WriteHomeID(b, sa.HomeID); err != nil {
		t.Fatal(err)
	}
	os.Remove(StateFile(b))
	s, err = New(Options{Home: b, Conn: n.conn(), Stream: "CMLAB", MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "seq 20") {
		t.Fatalf("a clone with another history: %v", err)
	}
}

func TestShipUnreachableRetriesThenShips(t *testing.T) {
	n := startNATS(t)
	n.stop() // the port is known and nothing listens there
	h := workloadHome(t, 50)
	s, err := New(Options{Home: h, Conn: n.conn(), Poll: 5 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "a recorded connection error", func() bool {
		st, err := ReadState(h)
		return err == nil && st.Retrying && strings.Contains(st.LastError, "connect") && strings.Contains(st.LastError, "retrying in")
	})
	n.start()
	waitFor(t, "everything shipped", func() bool { return s.State().Shipped == 50 && !s.State().Retrying })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkStream(t, n, h, s.State().Stream)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

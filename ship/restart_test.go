package ship

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
)

// TestShipServerRestart shuts the server down under a shipper three times
// while 16 clients append; the shipper retries (and says so in
// state/ship.json) and, after each restart, goes on: the stream ends up
// with every event exactly once, in seq order.
func TestShipServerRestart(t *testing.T) {
	n := startNATS(t)
	h := home.Home{Dir: t.TempDir()}
	e := openEngine(t, h)
	defer e.Close()
	p := startPosters(e, 16, time.Millisecond)
	s, err := New(Options{Home: h, Conn: n.conn(), Poll: 2 * time.Millisecond, Window: 64,
		AckTimeout: time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for i := 0; i < 3; i++ {
		shipped := s.State().Shipped
		waitFor(t, "shipping to progress", func() bool { return s.State().Shipped > shipped+200 })
		n.stop()
		waitFor(t, "the shipper to report the outage", func() bool {
			st, err := ReadState(h)
			return err == nil && st.Retrying && strings.Contains(st.LastError, "retrying in")
		})
		n.start()
	}
	posted := p.stop(t)
	last := e.Log().LastSeq()
	waitFor(t, "the shipper to catch up", func() bool { return s.State().Shipped == last })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, _ := ReadState(h); st.Retrying || st.Shipped != last {
		t.Fatalf("state after catching up: %+v", st)
	}
	if got := checkStream(t, n, h, s.State().Stream); got < uint64(posted) {
		t.Fatalf("%d events, %d posted", got, posted)
	}
}

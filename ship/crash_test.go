package ship

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/nats-io/nats.go/jetstream"
)

const shipChildEnv = "CMLAB_SHIP_CHILD"

// TestShipChild is the child of TestShipKillRounds: a shipper of the home
// in $CMLAB_SHIP_CHILD to $CMLAB_SHIP_CHILD_URL that runs until killed.
func TestShipChild(t *testing.T) {
	dir := crashchild.Role(t, shipChildEnv, "TestShipKillRounds")
	window, _ := strconv.Atoi(os.Getenv(shipChildEnv + "_WINDOW"))
	s, err := New(Options{Home: home.Home{Dir: dir}, Conn: Conn{URL: os.Getenv(shipChildEnv + "_URL")}, Window: window,
		Poll: 2 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		fmt.Println("new:", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	if err := s.Run(context.Background()); err != nil {
		fmt.Println("run:", err)
		os.Exit(4)
	}
	os.Exit(0)
}

// TestShipKillRounds SIGKILLs a re-executed shipper at random moments, 20
// times, while 16 clients append feedback to the home; the rounds share
// the home and the stream. Afterwards a last shipper catches up and the
// stream must hold every event of the log exactly once, in seq order.
func TestShipKillRounds(t *testing.T) {
	if os.Getenv(shipChildEnv) != "" {
		t.Skip("child")
	}
	n := startNATS(t)
	h := home.Home{Dir: t.TempDir()}
	e := openEngine(t, h)
	defer e.Close()
	id, err := EnsureHomeID(h)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := n.conn().connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	streamLast := func() uint64 { // 0 until the first child created the stream
		st, err := js.Stream(context.Background(), DefaultStream(id))
		if err != nil {
			return 0
		}
		info, err := st.Info(context.Background())
		if err != nil {
			return 0
		}
		return info.State.LastSeq
	}
	p := startPosters(e, 16, time.Millisecond)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 20))
	var progressed int
	var prev uint64
	for round := 0; round < 20; round++ {
		child := crashchild.StartPiped(t, "TestShipChild", shipChildEnv+"="+h.Dir, shipChildEnv+"_URL="+n.url(),
			fmt.Sprintf("%s_WINDOW=%d", shipChildEnv, 1+rng.IntN(300)))
		if round%4 != 3 {
			if line, _ := child.Line(); line != "ready" {
				child.Stop()
				t.Fatalf("round %d: child said %q: %s", round, line, child.Output())
			}
			// Kill while shipping: once the stream grew in this round,
			// after a random pause (mid-window, mid-ack or mid-write).
			child.Await(t, fmt.Sprintf("shipped in round %d", round), 15*time.Second, func() bool { return streamLast() > prev })
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		} else {
			// Kill anywhere: at start-up, in connect, in the resync.
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		}
		child.Kill(t)
		if last := streamLast(); last > prev {
			progressed++
			prev = last
		}
	}
	posted := p.stop(t)
	if progressed < 10 {
		t.Fatalf("the stream grew in only %d of 20 rounds (seed %d)", progressed, seed)
	}
	shipUntil(t, Options{Home: h, Conn: n.conn(), Poll: 2 * time.Millisecond})
	last := checkStream(t, n, h, DefaultStream(id))
	if last < uint64(posted) {
		t.Fatalf("%d events in the log, %d posted", last, posted)
	}
	t.Logf("%d events, the stream grew in %d rounds", last, progressed)
}

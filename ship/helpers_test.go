package ship

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServer is an in-process NATS server with JetStream, its store in a
// test directory, on 127.0.0.1.
type natsServer struct {
	t     testing.TB
	store string
	port  int
	srv   *server.Server
}

func startNATS(t testing.TB) *natsServer {
	t.Helper()
	n := &natsServer{t: t, store: t.TempDir(), port: server.RANDOM_PORT}
	n.start()
	t.Cleanup(n.stop)
	return n
}

// start starts the server (again, on the same port and store).
func (n *natsServer) start() {
	n.t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.store, NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	if err != nil {
		n.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats server not ready")
	}
	n.srv, n.port = s, s.Addr().(*net.TCPAddr).Port
}

func (n *natsServer) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsServer) conn() Conn { return Conn{URL: n.url()} }

// stream opens the named stream through a fresh connection.
func (n *natsServer) stream(t testing.TB, name string) jetstream.Stream {
	t.Helper()
	nc, err := n.conn().connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openEngine(t testing.TB, h home.Home) *engine.Engine {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var fbCount atomic.Uint64

// feedbackEvent is one feedback.submitted event with a fresh id.
func feedbackEvent(client int) *events.Event {
	n := fbCount.Add(1)
	overall := int(n % 100)
	return events.MustNew(fmt.Sprintf("lab_c%d", client), &events.FeedbackSubmitted{Entry: events.FeedbackEntry{
		SchemaVersion: 1, ID: fmt.Sprintf("fb_%d_%d", client, n), SessionID: fmt.Sprintf("lab_c%d", client),
		Ratings: &events.Ratings{Overall: &overall}, Notes: "shipped ✓",
	}})
}

// posters are n goroutine clients appending feedback until stopped.
type posters struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	n      atomic.Int64
	err    atomic.Value
}

func startPosters(e *engine.Engine, n int, pause time.Duration) *posters {
	ctx, cancel := context.WithCancel(context.Background())
	p := &posters{cancel: cancel}
	for c := 0; c < n; c++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for ctx.Err() == nil {
				if _, err := e.Append(ctx, feedbackEvent(c)); err != nil {
					if ctx.Err() == nil {
						p.err.Store(err)
					}
					return
				}
				p.n.Add(1)
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	return p
}

func (p *posters) stop(t testing.TB) int64 {
	t.Helper()
	p.cancel()
	p.wg.Wait()
	if err, ok := p.err.Load().(error); ok {
		t.Fatalf("poster: %v", err)
	}
	return p.n.Load()
}

// shipUntil runs a shipper of h in the background until it has shipped
// the log's last seq (read when called), then stops it.
func shipUntil(t testing.TB, opts Options) State {
	t.Helper()
	r, err := wal.OpenReader(opts.Home.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	last, err := r.LastSeq()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for s.State().Shipped < last {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("shipper ended at seq %d of %d: %v", s.State().Shipped, last, err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("shipper at seq %d of %d after 30s; state %+v", s.State().Shipped, last, s.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return s.State()
}

// checkStream asserts that stream holds exactly the events 1..last of the
// log in h, once each, in seq order: stream seq = event seq, Nats-Msg-Id =
// the event's id, data = its entry bytes.
func checkStream(t testing.TB, n *natsServer, h home.Home, stream string) uint64 {
	t.Helper()
	id, err := ReadHomeID(h)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	last, err := r.LastSeq()
	if err != nil {
		t.Fatal(err)
	}
	info, err := n.stream(t, stream).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st := info.State; st.Msgs != last || st.FirstSeq != 1 || st.LastSeq != last || st.NumDeleted != 0 {
		t.Fatalf("stream %s: %d messages, seq %d..%d, %d deleted; want %d messages, seq 1..%d", stream, st.Msgs, st.FirstSeq, st.LastSeq, st.NumDeleted, last, last)
	}
	src, err := OpenSource(context.Background(), n.conn(), stream, id)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	key, err := ReadKey(KeyFile(h))
	if err != nil {
		t.Fatal(err)
	}
	src.SetKey(key, false) // every message's MAC checked too
	next, i := src.Events(context.Background(), 1, 0), uint64(0)
	remote := map[uint64]*events.Event{}
	for ev, err := range next {
		if err != nil {
			t.Fatal(err)
		}
		i++
		if ev.Seq != i {
			t.Fatalf("stream yielded seq %d as its message %d", ev.Seq, i)
		}
		remote[ev.Seq] = ev
	}
	if i != last {
		t.Fatalf("stream yielded %d events, the log has %d", i, last)
	}
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq > last {
			break
		}
		got := remote[ev.Seq]
		a, _ := wal.EncodeEntry(ev)
		b, _ := wal.EncodeEntry(got)
		if got.ID != ev.ID || string(a) != string(b) {
			t.Fatalf("seq %d: stream holds event %s, the log %s (entries equal: %v)", ev.Seq, got.ID, ev.ID, string(a) == string(b))
		}
	}
	return last
}

// homeKey is h's ship key (state/ship-key), which a restore of its stream needs.
func homeKey(t testing.TB, h home.Home) []byte {
	t.Helper()
	k, err := ReadKey(KeyFile(h))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Package shiptest holds what the shipping tests of package ship, of the
// CLI (cmd/cmlab restore, salvage --from-nats) and of the damage matrix
// (fuzz/torture) share: an in-process NATS server with JetStream, and, to
// play an attacker who may publish to a home's stream, a home's events, an
// event's log entry re-encoded at another seq, and a forged publish with
// the home's headers.
package shiptest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS starts an in-process NATS server with JetStream on 127.0.0.1 (its
// store in a temporary directory), stopped when the test ends, and
// returns its URL.
func NATS(t testing.TB) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return fmt.Sprintf("nats://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
}

// LogEvents returns the events of h's log.
func LogEvents(t testing.TB, h home.Home) []*events.Event {
	t.Helper()
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []*events.Event
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// EntryAt is ev's log entry re-encoded at seq.
func EntryAt(t testing.TB, ev *events.Event, seq uint64) []byte {
	t.Helper()
	c := *ev
	c.Seq = seq
	b, err := wal.EncodeEntry(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Forged is a message an attacker publishes to a home's stream as seq
// Seq with that home's subject and headers (package ship's, which this
// package cannot import: ship's own tests use it).
type Forged struct {
	Subject string
	Header  map[string]string // an empty value is left out (no MAC)
	Seq     uint64
	Data    []byte // the entry bytes
	MsgID   string // its own message id (the stream's dedupe)
}

// Publish publishes f on the NATS server at url, expecting the stream to
// end at f.Seq-1, and fails the test unless it is stored as f.Seq.
func Publish(t testing.TB, url string, f Forged) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("forger"), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(f.Subject)
	m.Data = f.Data
	for k, v := range f.Header {
		if v != "" {
			m.Header.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(f.MsgID), jetstream.WithExpectLastSequence(f.Seq-1))
	if err != nil || ack.Sequence != f.Seq {
		t.Fatalf("forged publish: %+v %v", ack, err)
	}
}

package ship

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishForged publishes ev's entry re-encoded at seq to homeID's stream
// with that home's headers, a message id of its own and mac (none when
// ""), as an attacker who may publish to the stream can.
func publishForged(t *testing.T, n *natsServer, stream, homeID string, ev *events.Event, seq uint64, msgID, mac string) {
	t.Helper()
	c := *ev
	c.Seq = seq
	data, err := wal.EncodeEntry(&c)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := n.conn().connect("forger")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(Subject(homeID, c.Type))
	m.Data = data
	m.Header.Set(HeaderHomeID, homeID)
	m.Header.Set(HeaderSeq, strconv.FormatUint(seq, 10))
	m.Header.Set(HeaderType, c.Type)
	if mac != "" {
		m.Header.Set(HeaderMAC, mac)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequence(seq-1))
	if err != nil || ack.Sequence != seq {
		t.Fatalf("forged publish: %+v %v", ack, err)
	}
}

// readLog returns the events of h's log.
func readLog(t *testing.T, h home.Home) []*events.Event {
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

// TestRestoreRefusesForgedForeignOrDuplicatedEvents (issue 27 finding
// 10): an event copied from another home, published as seq N+1 with this
// home's headers and a message id of its own, was restored. Each event
// now carries a MAC under the home's ship key; restore refuses the forged
// seq (foreign event with the attacker's MAC, no MAC after authenticated
// ones, this home's own event and MAC moved to another seq), creates
// nothing, and restores the events before it with UpTo.
func TestRestoreRefusesForgedForeignOrDuplicatedEvents(t *testing.T) {
	n := startNATS(t)
	other := workloadHome(t, 10)
	foreign := readLog(t, other)[3]
	attackerKey := make([]byte, 32)
	for _, c := range []struct {
		name string
		mac  func(h home.Home, own []*events.Event, id string) (ev *events.Event, mac string)
	}{
		{"foreign event, attacker's MAC", func(h home.Home, _ []*events.Event, id string) (*events.Event, string) {
			return foreign, eventMAC(attackerKey, id, 41, mustEntry(t, foreign, 41))
		}},
		{"foreign event, no MAC", func(h home.Home, _ []*events.Event, id string) (*events.Event, string) {
			return foreign, ""
		}},
		{"own event again at the next seq", func(h home.Home, own []*events.Event, id string) (*events.Event, string) {
			return own[39], eventMAC(homeKey(t, h), id, 40, mustEntry(t, own[39], 40))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := workloadHome(t, 40)
			st := shipUntil(t, Options{Home: h, Conn: n.conn(), Poll: 5 * time.Millisecond})
			if st.Shipped != 40 {
				t.Fatalf("shipped %d", st.Shipped)
			}
			ev, mac := c.mac(h, readLog(t, h), st.HomeID)
			publishForged(t, n, st.Stream, st.HomeID, ev, 41, "forged-"+strconv.Itoa(len(c.name)), mac)

			into := home.Home{Dir: filepath.Join(t.TempDir(), "restored")}
			_, err := Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: into, Key: homeKey(t, h)})
			var me *MessageError
			if !errors.Is(err, ErrForged) || !errors.As(err, &me) || me.Seq != 41 || !strings.Contains(err.Error(), "seq 41") {
				t.Fatalf("restore of a stream with a forged seq 41: %v", err)
			}
			if _, err := os.Stat(into.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused restore left %s: %v", into.Dir, err)
			}
			// Without the key an authenticated stream is not restored blindly.
			if _, err := Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: into}); !errors.Is(err, ErrNeedKey) && !errors.Is(err, ErrForged) {
				t.Fatalf("restore without a key: %v", err)
			}
			// Up to the last authentic seq the stream restores.
			if res, err := Restore(context.Background(), RestoreOptions{Conn: n.conn(), HomeID: st.HomeID, Into: into, Key: homeKey(t, h), UpTo: 40}); err != nil || res.Last != 40 {
				t.Fatalf("restore up to 40: %+v %v", res, err)
			}
		})
	}
}

func mustEntry(t *testing.T, ev *events.Event, seq uint64) []byte {
	t.Helper()
	c := *ev
	c.Seq = seq
	b, err := wal.EncodeEntry(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

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

	"github.com/cmlab/cmlab/internal/shiptest"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

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
	foreign := shiptest.LogEvents(t, other)[3]
	attackerKey := make([]byte, 32)
	for _, c := range []struct {
		name string
		mac  func(h home.Home, own []*events.Event, id string) (ev *events.Event, mac string)
	}{
		{"foreign event, attacker's MAC", func(h home.Home, _ []*events.Event, id string) (*events.Event, string) {
			return foreign, eventMAC(attackerKey, id, 41, shiptest.EntryAt(t, foreign, 41))
		}},
		{"foreign event, no MAC", func(h home.Home, _ []*events.Event, id string) (*events.Event, string) {
			return foreign, ""
		}},
		{"own event again at the next seq", func(h home.Home, own []*events.Event, id string) (*events.Event, string) {
			return own[39], eventMAC(homeKey(t, h), id, 40, shiptest.EntryAt(t, own[39], 40))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := workloadHome(t, 40)
			st := shipUntil(t, Options{Home: h, Conn: n.conn(), Poll: 5 * time.Millisecond})
			if st.Shipped != 40 {
				t.Fatalf("shipped %d", st.Shipped)
			}
			ev, mac := c.mac(h, shiptest.LogEvents(t, h), st.HomeID)
			shiptest.Publish(t, n.url(), shiptest.Forged{Subject: Subject(st.HomeID, ev.Type), Seq: 41, Data: shiptest.EntryAt(t, ev, 41),
				MsgID:  "forged-" + strconv.Itoa(len(c.name)),
				Header: map[string]string{HeaderHomeID: st.HomeID, HeaderSeq: "41", HeaderType: ev.Type, HeaderMAC: mac}})

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

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/ship"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRestoreCLIRefusesForgedDuplicatedOrCorruptMessages (issue 27
// finding 10 and item 11): an event published as seq N+1 with the home's
// headers by someone else — another home's event, the home's own last
// event again under a new message id, or its bytes damaged — was restored
// (exit 0), or refused with exit 1 and no fix. Each is refused with exit
// 3, naming the seq and the fix; the fix (--to N) restores the rest.
func TestRestoreCLIRefusesForgedDuplicatedOrCorruptMessages(t *testing.T) {
	url := testNATS(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		forged func(own, foreign []*events.Event) ([]byte, string)
	}{
		{"foreign", func(_, foreign []*events.Event) ([]byte, string) { return entryAt(t, foreign[2], 31), "" }},
		{"duplicated", func(own, _ []*events.Event) ([]byte, string) { return entryAt(t, own[29], 31), "copied" }},
		{"corrupt", func(own, _ []*events.Event) ([]byte, string) {
			b := entryAt(t, own[29], 31)
			b[len(b)-1] ^= 0x20
			return b, ""
		}},
	}
	other := workloadHomeCLI(t, 10)
	foreign := logEvents(t, other)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := workloadHomeCLI(t, 30)
			id := shipAll(t, h, url, 30)
			key := filepath.Join(h.Dir, "state", "ship-key")
			own := logEvents(t, h)
			data, mac := c.forged(own, foreign)
			nc, err := nats.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			st, err := js.Stream(ctx, ship.DefaultStream(id))
			if err != nil {
				t.Fatal(err)
			}
			if mac == "copied" {
				m30, err := st.GetMsg(ctx, 30)
				if err != nil {
					t.Fatal(err)
				}
				mac = m30.Header.Get(ship.HeaderMAC)
			}
			m := nats.NewMsg(ship.Subject(id, "feedback.submitted"))
			m.Data = data
			m.Header.Set(ship.HeaderHomeID, id)
			m.Header.Set(ship.HeaderSeq, "31")
			m.Header.Set(ship.HeaderType, "feedback.submitted")
			if mac != "" {
				m.Header.Set(ship.HeaderMAC, mac)
			}
			if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID("forged-"+c.name), jetstream.WithExpectLastSequence(30)); err != nil {
				t.Fatal(err)
			}
			into := filepath.Join(t.TempDir(), "restored")
			code, out, errs := cli(t, "restore", "--nats", url, "--home-id", id, "--key", key, "--into", into)
			if code != exitCorrupt || !strings.Contains(errs, "seq 31") || !strings.Contains(errs, "fix: seq 31 is not an event this home shipped") || !strings.Contains(errs, "--to 30") {
				t.Fatalf("restore: exit %d\n%s%s", code, out, errs)
			}
			if _, err := os.Stat(into); err == nil {
				t.Fatal("a refused restore created its directory")
			}
			code, out, errs = cli(t, "restore", "--nats", url, "--home-id", id, "--key", key, "--to", "30", "--into", into)
			if code != 0 || !strings.Contains(out, "30 events (seq 1–30)") {
				t.Fatalf("restore --to 30: exit %d\n%s%s", code, out, errs)
			}
		})
	}
	// Without a key an authenticated stream is refused, naming the key.
	h := workloadHomeCLI(t, 5)
	id := shipAll(t, h, url, 5)
	code, _, errs := cli(t, "restore", "--nats", url, "--home-id", id, "--into", filepath.Join(t.TempDir(), "r"))
	if code != exitCorrupt || !strings.Contains(errs, "fix: pass --key FILE") {
		t.Fatalf("restore without --key: exit %d\n%s", code, errs)
	}
	if code, _, errs := cli(t, "restore", "--nats", url, "--home-id", id, "--unauthenticated", "--into", filepath.Join(t.TempDir(), "r")); code != 0 {
		t.Fatalf("restore --unauthenticated: exit %d\n%s", code, errs)
	}
}

// workloadHomeCLI is a home of n workload events of every type.
func workloadHomeCLI(t *testing.T, n int) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	e, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range projections.Workload(projections.WorkloadEveryType, 5, n) {
		if _, err := e.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

func logEvents(t *testing.T, h home.Home) []*events.Event {
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

// entryAt is ev's log entry re-encoded at seq.
func entryAt(t *testing.T, ev *events.Event, seq uint64) []byte {
	t.Helper()
	c := *ev
	c.Seq = seq
	b, err := wal.EncodeEntry(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/shiptest"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/ship"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// testNATS starts an in-process NATS server with JetStream on 127.0.0.1.
func testNATS(t *testing.T) string { return shiptest.NATS(t) }

// shipAll ships h's whole log with the ship package and returns its id.
func shipAll(t *testing.T, h home.Home, url string, last uint64) string {
	t.Helper()
	s, err := ship.New(ship.Options{Home: h, Conn: ship.Conn{URL: url}, Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for s.State().Shipped < last && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil || s.State().Shipped != last {
		t.Fatalf("shipped %d of %d: %v", s.State().Shipped, last, err)
	}
	return s.HomeID()
}

// TestRestoreAndReplayFromNATS: a shipped home restored by 'cmlab restore'
// passes 'wal verify' and 'rebuild --check' and has the original's views
// byte for byte; 'replay --from-nats' builds an earlier state; 'status'
// shows the shipping cursor; a gap exits 3 naming the missing seqs.
func TestRestoreAndReplayFromNATS(t *testing.T) {
	url := testNATS(t)
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	var batch []*events.Event
	for ev := range projections.Workload(projections.WorkloadEveryType, 5, 900) {
		if batch = append(batch, ev); len(batch) == 9 {
			if _, err := e.Append(ctx, batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	id := shipAll(t, h, url, 900)
	code, out, errs := cli(t, "status", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, "shipping:    seq 900 of 900 shipped to stream CMLAB_"+id+" (lag 0)") {
		t.Fatalf("status: %d\n%s%s", code, out, errs)
	}

	key := filepath.Join(h.Dir, "state", "ship-key") // every event's MAC is checked with it
	into := filepath.Join(t.TempDir(), "restored")
	code, out, errs = cli(t, "restore", "--nats", url, "--home-id", id, "--key", key, "--into", into)
	if code != 0 || !strings.Contains(out, "restored home "+id+": 900 events (seq 1–900)") {
		t.Fatalf("restore: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := cli(t, "wal", "verify", "--home", into); code != 0 || !strings.Contains(out, "seq 1..900") || !strings.Contains(out, "ok") {
		t.Fatalf("wal verify: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := cli(t, "rebuild", "--check", "--home", into); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("rebuild --check: %d\n%s%s", code, out, errs)
	}
	if d, err := projections.Compare(h, home.Home{Dir: into}); err != nil || d != nil {
		t.Fatalf("restored views differ from the original's: %v %v", d, err)
	}
	if code, _, errs := cli(t, "restore", "--nats", url, "--home-id", id, "--key", key, "--into", into); code == 0 || !strings.Contains(errs, "not empty") {
		t.Fatalf("restore into a full directory: %d %s", code, errs)
	}

	at := filepath.Join(t.TempDir(), "at300")
	code, out, errs = cli(t, "replay", "--from-nats", url, "--home-id", id, "--key", key, "--to", "300", "--into", at)
	if code != 0 || !strings.Contains(out, "replayed 300 shipped events") {
		t.Fatalf("replay --from-nats: %d\n%s%s", code, out, errs)
	}
	local := filepath.Join(t.TempDir(), "local300")
	if code, _, errs := cli(t, "replay", "--home", h.Dir, "--to", "300", "--into", local); code != 0 {
		t.Fatalf("replay --to: %s", errs)
	}
	if d, err := projections.Compare(home.Home{Dir: local}, home.Home{Dir: at}); err != nil || d != nil {
		t.Fatalf("replay --from-nats differs from replay --to: %v %v", d, err)
	}
	if code, _, errs := cli(t, "replay", "--from-nats", url, "--to", "3", "--into", t.TempDir()); code != 2 || !strings.Contains(errs, "--home-id") {
		t.Fatalf("replay --from-nats without --home-id: %d %s", code, errs)
	}

	// A gap: exit 3, naming the missing seqs, nothing created.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, "CMLAB_"+id)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{17, 18, 19, 600} {
		if err := st.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	gapInto := filepath.Join(t.TempDir(), "gap")
	code, _, errs = cli(t, "restore", "--nats", url, "--home-id", id, "--key", key, "--into", gapInto)
	if code != 3 || !strings.Contains(errs, "seq 17-19, 600") {
		t.Fatalf("restore over a gap: %d %s", code, errs)
	}
	if _, err := os.Stat(gapInto); err == nil {
		t.Fatal("restore over a gap created its directory")
	}
	if code, _, errs := cli(t, "replay", "--from-nats", url, "--home-id", id, "--key", key, "--to", "100", "--into", gapInto); code != 3 || !strings.Contains(errs, "seq 17-19") {
		t.Fatalf("replay over a gap: %d %s", code, errs)
	}
	if code, _, errs := cli(t, "restore", "--nats", url, "--into", gapInto); code != 2 {
		t.Fatalf("restore without --home-id: %d %s", code, errs)
	}
}

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/ship"
	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// shippedUntil polls state/ship.json until the stream acknowledged seq last.
func shippedUntil(t *testing.T, h home.Home, last uint64) cursor.State {
	t.Helper()
	var st cursor.State
	pollUntil(t, fmt.Sprintf("seq %d shipped", last), func() bool {
		var err error
		st, err = cursor.Read(h)
		return err == nil && st.Shipped >= last
	})
	return st
}

// streamSeqs is the stream's message count and last sequence.
func streamSeqs(t *testing.T, url, name string) (uint64, uint64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs, info.State.LastSeq
}

// lastSeqOf is the last seq of h's log, read without its lock.
func lastSeqOf(t *testing.T, h home.Home) uint64 {
	t.Helper()
	st, err := wal.Stat(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	return st.Last
}

// TestShipCommandsProcess drives the two ways an operator ships, as
// processes: `cmlab serve --ship URL` ships what clients post while it
// serves; after it stops, `cmlab ship --nats URL` ships what was written
// without a daemon and ends with exit 0 on Ctrl+C. The stream then holds
// every event of the log once, stream seq = event seq.
func TestShipCommandsProcess(t *testing.T) {
	url := testNATS(t)
	hdir := filepath.Join(t.TempDir(), "home")
	h := home.Home{Dir: hdir}
	p, _ := serveProc(t, "--home", hdir, "--ship", url)
	for i := 0; i < 5; i++ {
		if code, _, errs := cliRun(t, nil, "--home", hdir, "feedback", "add", "--notes", fmt.Sprint("served ", i)); code != 0 {
			t.Fatalf("feedback add = %d %q", code, errs)
		}
	}
	id, err := ship.ReadHomeID(h)
	if err != nil {
		t.Fatal(err)
	}
	st := shippedUntil(t, h, lastSeqOf(t, h))
	if st.HomeID != id || st.Stream != ship.DefaultStream(id) || st.LastError != "" {
		t.Fatalf("ship.json under serve: %+v (home id %s)", st, id)
	}
	if code, _, errs := cliRun(t, nil, "stop", "--home", hdir); code != 0 {
		t.Fatalf("stop = %d %q", code, errs)
	}
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("serve exit %d: %q", code, p.stderr.String())
	}

	// Written with no daemon: nothing ships them until `cmlab ship`.
	for i := 0; i < 3; i++ {
		if code, _, errs := cliRun(t, nil, "--home", hdir, "feedback", "add", "--notes", fmt.Sprint("offline ", i)); code != 0 {
			t.Fatalf("feedback add = %d %q", code, errs)
		}
	}
	last := lastSeqOf(t, h)
	if st, _ := cursor.Read(h); st.Shipped >= last {
		t.Fatalf("shipped %d of %d before cmlab ship ran", st.Shipped, last)
	}
	sh := cliStart(t, nil, "ship", "--home", hdir, "--nats", url)
	shippedUntil(t, h, last)
	sh.cmd.Process.Signal(syscall.SIGINT)
	if code := sh.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("cmlab ship after Ctrl+C = %d %q %q", code, sh.stdout.String(), sh.stderr.String())
	}
	if msgs, lastSeq := streamSeqs(t, url, ship.DefaultStream(id)); msgs != last || lastSeq != last {
		t.Fatalf("stream holds %d messages up to seq %d; the log %d events", msgs, lastSeq, last)
	}
	code, out, errs := cliRun(t, nil, "status", "--home", hdir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("shipping:    seq %d of %d shipped to stream %s (lag 0)", last, last, ship.DefaultStream(id))) {
		t.Fatalf("status = %d %q %q", code, out, errs)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

func walCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(&globalOpts{stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

// walHome writes n events on two streams into a new home's log, keeping
// the log open (held) until the test ends.
func walHome(t *testing.T, n int) (string, *wal.Log) {
	t.Helper()
	h := t.TempDir()
	l, err := wal.Open(wal.Options{Dir: filepath.Join(h, "wal"), SegmentSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := 0; i < n; i++ {
		var p events.Payload = &events.WalSalvaged{LostSeq: uint64(i), Reason: "r"}
		stream := "a"
		if i%3 == 0 {
			p, stream = &events.RecoveryApplied{Auto: true}, "b"
		}
		ev := events.MustNew(stream, p)
		if i == 1 {
			ev.WithRequest("req-1", "sha256-x", json.RawMessage(`{"ok":1}`))
		}
		if _, err := l.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	return h, l
}

func TestWalDumpFiltersOnAHeldLog(t *testing.T) {
	h, _ := walHome(t, 12)
	code, out, errs := walCLI(t, "--home", h, "wal", "dump", "--from", "2", "--to", "10", "--stream", "a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var seqs []uint64
	for _, ln := range lines {
		var d struct {
			Seq    uint64          `json:"seq"`
			Type   string          `json:"type"`
			Stream string          `json:"stream"`
			Req    string          `json:"req"`
			Resp   json.RawMessage `json:"resp"`
			Data   map[string]any  `json:"data"`
		}
		if err := json.Unmarshal([]byte(ln), &d); err != nil {
			t.Fatalf("line %q: %v", ln, err)
		}
		if d.Stream != "a" || d.Type != events.TypeWalSalvaged || d.Data["reason"] != "r" || d.Data["lost_seq"] != float64(d.Seq-1) {
			t.Fatalf("line %q", ln)
		}
		if d.Seq == 2 && (d.Req != "req-1" || string(d.Resp) != `{"ok":1}`) {
			t.Fatalf("request not dumped: %q", ln)
		}
		seqs = append(seqs, d.Seq)
	}
	// seqs 2..10 on stream a: every seq whose index i=seq-1 is not a multiple of 3.
	want := []uint64{2, 3, 5, 6, 8, 9}
	if len(seqs) != len(want) {
		t.Fatalf("seqs %v, want %v", seqs, want)
	}
	for i := range want {
		if seqs[i] != want[i] {
			t.Fatalf("seqs %v, want %v", seqs, want)
		}
	}
	code, out, _ = walCLI(t, "--home", h, "wal", "dump", "--type", "recovery.*")
	if code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("--type pattern: exit %d, %q", code, out)
	}
}

func TestWalStatAndVerify(t *testing.T) {
	h, l := walHome(t, 12)
	code, out, errs := walCLI(t, "--home", h, "--json", "wal", "stat")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var st wal.StatReport
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Events != 12 || st.Last != 12 || st.ByType[events.TypeRecoveryApplied] != 4 || st.ByType[events.TypeWalSalvaged] != 8 || len(st.Segments) < 2 || st.LockPID != os.Getpid() {
		t.Fatalf("stat %+v", st)
	}
	if code, out, _ := walCLI(t, "--home", h, "wal", "verify"); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("verify of a good log: exit %d %q", code, out)
	}
	l.Close()
	// Damage an entry in the first segment: exit 3, and the place is named.
	seg := filepath.Join(h, "wal", "00000000000000000001")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[30] ^= 0xff
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = walCLI(t, "--home", h, "wal", "verify")
	if code != exitCorrupt || !strings.Contains(out, "CORRUPT segment 00000000000000000001 offset 0 seq 1") || !strings.Contains(errs, "--salvage") {
		t.Fatalf("verify of a damaged log: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = walCLI(t, "--home", h, "--json", "wal", "verify")
	var rep wal.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitCorrupt || len(rep.Bad) != 1 || rep.Bad[0].Seq != 1 {
		t.Fatalf("verify --json: exit %d %+v %v", code, rep, err)
	}
}

type walDumpBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *walDumpBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *walDumpBuffer) lines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), "\n")
}

// followDump runs 'wal dump' with o (o.follow set) on the log in dir in
// the background, until ctx ends; done gets its result.
func followDump(ctx context.Context, dir string, o *walDumpOpts) (out *walDumpBuffer, done <-chan error) {
	out = &walDumpBuffer{}
	res := make(chan error, 1)
	go func() { res <- dumpWAL(ctx, dir, o, out) }()
	return out, res
}

func TestWalDumpFollow(t *testing.T) {
	h, l := walHome(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, done := followDump(ctx, filepath.Join(h, "wal"), &walDumpOpts{from: 1, follow: true, poll: 5 * time.Millisecond})
	for i := 0; i < 20; i++ {
		if _, err := l.Append(context.Background(), events.MustNew("c", &events.WalSalvaged{LostSeq: uint64(100 + i)})); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for out.lines() < 23 {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d lines, want 23", out.lines())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := out.lines(); n != 23 {
		t.Fatalf("%d lines", n)
	}
}

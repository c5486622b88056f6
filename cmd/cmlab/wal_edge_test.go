package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// The edge cases of 'cmlab wal verify|dump|stat' that wal_test.go leaves
// out: flag validation, damage in a segment other than the last, a torn
// tail, the zeros a SIGKILLed writer leaves, a log written by another
// process while it is followed, and the promise that none of the three
// commands changes a byte of the home.

// walEdgeClosedHome is walHome (n events on streams a and b, 1 KiB
// segments) with the log closed, as a stopped daemon leaves it.
func walEdgeClosedHome(t *testing.T, n int) string {
	t.Helper()
	h, l := walHome(t, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// walEdgeDumpLine is one line of 'wal dump' with every field it may carry.
type walEdgeDumpLine struct {
	Seq       uint64          `json:"seq"`
	V         int             `json:"v"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	TS        int64           `json:"ts"`
	Time      string          `json:"time"`
	Stream    string          `json:"stream"`
	Req       string          `json:"req"`
	ReqHash   string          `json:"rh"`
	Resp      json.RawMessage `json:"resp"`
	Data      json.RawMessage `json:"data"`
	DataError string          `json:"data_error"`
}

// walEdgeParse decodes dump output strictly: one JSON object per line,
// no field the dump line does not define.
func walEdgeParse(t *testing.T, out string) []walEdgeDumpLine {
	t.Helper()
	var lines []walEdgeDumpLine
	if out == "" {
		return nil
	}
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("dump output does not end in a newline: %q", out)
	}
	for _, ln := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(ln))
		dec.DisallowUnknownFields()
		var d walEdgeDumpLine
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("line %q: %v", ln, err)
		}
		if dec.More() {
			t.Fatalf("line %q holds more than one value", ln)
		}
		lines = append(lines, d)
	}
	return lines
}

// walEdgeSeqs fails unless lines are exactly the seqs from..to, in order.
func walEdgeSeqs(t *testing.T, lines []walEdgeDumpLine, from, to uint64) {
	t.Helper()
	if uint64(len(lines)) != to-from+1 {
		t.Fatalf("%d lines, want seqs %d..%d", len(lines), from, to)
	}
	for i, d := range lines {
		if d.Seq != from+uint64(i) {
			t.Fatalf("line %d has seq %d, want %d", i, d.Seq, from+uint64(i))
		}
	}
}

func TestWalEdgeUsageErrors(t *testing.T) {
	h := walEdgeClosedHome(t, 4)
	noLog := t.TempDir() // a home without a wal directory
	for _, tc := range []struct {
		name string
		args []string
		want string // stderr prefix
	}{
		{"to before from", []string{"wal", "dump", "--from", "5", "--to", "3"}, "cmlab: --to is before --from\n"},
		{"negative from", []string{"wal", "dump", "--from", "-1"}, `cmlab: invalid argument "-1" for "--from" flag`},
		{"negative to", []string{"wal", "dump", "--to", "-2"}, `cmlab: invalid argument "-2" for "--to" flag`},
		{"non-numeric from", []string{"wal", "dump", "--from", "x"}, `cmlab: invalid argument "x" for "--from" flag`},
		{"bad type pattern", []string{"wal", "dump", "--type", "feedback.[", "--type", "x"}, "cmlab: bad --type pattern \"feedback.[\"\n"},
		{"bad poll", []string{"wal", "dump", "--poll", "soon"}, `cmlab: invalid argument "soon" for "--poll" flag`},
		{"dump argument", []string{"wal", "dump", "7"}, `cmlab: unknown command "7" for "cmlab wal dump"`},
		{"verify argument", []string{"wal", "verify", "x"}, `cmlab: unknown command "x" for "cmlab wal verify"`},
		{"stat flag of dump", []string{"wal", "stat", "--from", "1"}, "cmlab: unknown flag: --from\n"},
	} {
		for _, home := range []string{h, noLog} {
			t.Run(tc.name, func(t *testing.T) {
				code, out, errs := walCLI(t, append([]string{"--home", home}, tc.args...)...)
				if code != exitUsage || out != "" || !strings.HasPrefix(errs, tc.want) {
					t.Fatalf("%v in %s: exit %d, stdout %q, stderr %q; want exit 2, stderr %q…", tc.args, filepath.Base(home), code, out, errs, tc.want)
				}
			})
		}
	}
	if _, err := os.Stat(filepath.Join(noLog, "wal")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused command created the log directory: %v", err)
	}
	// Bounds that are not errors: --from 0 is seq 1, --to equal to
	// --from is one event, --from past the end prints nothing.
	for _, tc := range []struct {
		args     []string
		from, to uint64
	}{
		{[]string{"--from", "0"}, 1, 4},
		{[]string{"--from", "3", "--to", "3"}, 3, 3},
		{[]string{"--to", "2"}, 1, 2},
		{[]string{"--from", "4", "--to", "99"}, 4, 4},
		{[]string{"--from", "5"}, 5, 4},
	} {
		code, out, errs := walCLI(t, append([]string{"--home", h, "wal", "dump"}, tc.args...)...)
		if code != 0 || errs != "" {
			t.Fatalf("dump %v: exit %d %s", tc.args, code, errs)
		}
		walEdgeSeqs(t, walEdgeParse(t, out), tc.from, tc.to)
	}
}

// TestWalEdgeDumpFields: every line carries seq, v, id, type, ts, time,
// stream and the decoded data, req/rh/resp only when the event has them,
// with the values stored in the log; an event this binary cannot decode
// is still dumped, its payload as base64 beside the reason.
// TestWalEdgeDamageInEarlierSegment: damage inside an entry of a segment
// that is not the last is corruption: verify exits 3 naming the segment,
// the frame's offset and the seq; dump prints what precedes it, then
// exits 3; stat counts it; none of them writes.
// TestWalEdgeTornTailNotRepaired: half a frame at the end of the last
// segment is a torn tail: reported, exit 0, every good event dumped, and
// left in place — only Open cuts it.
// TestWalEdgeWriterChild is the child of the tests below, re-executed
// from the test binary: "append" appends walEdgeAppenders×walEdgePerAppender
// events concurrently to the log in $CMLAB_TEST_WAL_EDGE_DIR, in two
// halves (it says "half" and waits for "go" on stdin in between), and
// closes it; "hold" appends walEdgeHeld events, says "ready" and waits to
// be killed.
// walEdgeOutput is the k-th event of appender g: 8 KiB of output on
// stream g<g> at spool offset k.
// walEdgeCheckOutput fails unless lines are seqs 1..n of walEdgeOutput
// events in which each appender's events come in its own order.
// TestWalEdgeFollowAnotherProcess: 'wal dump --follow' started on an
// empty log directory prints every event another process appends —
// concurrently, across segment files and their preallocated zeros —
// exactly once and in order, and returns when its context ends.
// TestWalEdgeDumpFollowStopsAtTo: with --follow and --to, dump returns
// once seq --to has gone by — also when it is the last event on disk and
// when the filters leave it out — instead of waiting for a later event.
func TestWalEdgeDumpFollowStopsAtTo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []uint64
	}{
		{"printed", "", []uint64{6, 7}},
		{"filtered out", "a", []uint64{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, l := walHome(t, 5) // seq 7 will be on stream b
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out walDumpBuffer
			done := make(chan error, 1)
			go func() {
				done <- dumpWAL(ctx, filepath.Join(h, "wal"), &walDumpOpts{from: 6, to: 7, stream: tc.stream, follow: true, poll: 2 * time.Millisecond}, &out)
			}()
			for _, p := range []events.Payload{&events.WalSalvaged{LostSeq: 5}, &events.RecoveryApplied{}} {
				stream := "a"
				if _, ok := p.(*events.RecoveryApplied); ok {
					stream = "b"
				}
				if _, err := l.Append(context.Background(), events.MustNew(stream, p)); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				cancel()
				<-done
				t.Fatalf("dump --follow --to 7 still waiting with seq 7 on disk; printed %d line(s)", out.lines())
			}
			out.mu.Lock()
			lines := walEdgeParse(t, out.b.String())
			out.mu.Unlock()
			var seqs []uint64
			for _, d := range lines {
				seqs = append(seqs, d.Seq)
			}
			if !reflect.DeepEqual(seqs, tc.want) {
				t.Fatalf("seqs %v, want %v", seqs, tc.want)
			}
		})
	}
}

// TestWalEdgeKilledWriterPreallocatedTail: a writer SIGKILLed while it
// held the log leaves its last segment ending in preallocated zeros. They
// are not damage: verify is ok, stat shows them as preallocated, dump
// prints every event; a frame torn half-way into them is a torn tail.
// Nothing is written either time.
// TestWalEdgeMissingSegmentAndStrayFiles: a segment file gone from the
// middle of the log is corruption named at the end of the segment before
// it; files that are not segments (tidwall's .START/.END, notes, a
// directory with a segment's name) are ignored.

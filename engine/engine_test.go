package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

func openTest(t *testing.T, h home.Home) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Options{Home: h, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// fixedClock returns a clock that advances 1 ms per call from a fixed instant.
func fixedClock() func() time.Time {
	t0 := time.Date(2026, 2, 6, 12, 0, 0, 0, time.UTC)
	n := 0
	return func() time.Time { n++; return t0.Add(time.Duration(n) * time.Millisecond) }
}

func readView(t *testing.T, h home.Home, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustAppend(t *testing.T, e *Engine, evs ...*events.Event) []uint64 {
	t.Helper()
	seqs, err := e.Append(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// The terminal depends on output.spool and blocks/<id>.out being exactly
// the concatenation of their pty.output data (and prompt lines for the
// spool), readable as soon as Append returns.
func TestPtySpoolIsConcatenationReadableAtOnce(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	defer e.Close()
	conv := "conv_1"
	blk := events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "echo hi", Cwd: "/", Status: events.BlockRunning, OutputPath: "blocks/blk_1.out"}
	mustAppend(t, e, events.MustNew(conv, &events.PtyBlockBegin{Block: blk}))
	var spool, out bytes.Buffer
	chunks := []string{"hello\n", "wor", "ld\n", "", "\x00\xff binary\n"}
	for _, c := range chunks {
		mustAppend(t, e, events.MustNew(conv, &events.PtyOutput{BlockID: "blk_1", SpoolOffset: int64(spool.Len()), Data: []byte(c)}))
		spool.WriteString(c)
		out.WriteString(c)
		if got := readView(t, h, projections.PtySpoolView(conv)); !bytes.Equal(got, spool.Bytes()) {
			t.Fatalf("spool after %q = %q, want %q", c, got, spool.Bytes())
		}
		if got := readView(t, h, projections.PtyBlockOutputView(conv, "blk_1")); !bytes.Equal(got, out.Bytes()) {
			t.Fatalf("block out = %q, want %q", got, out.Bytes())
		}
	}
	line := "__FWS_PROMPT__ ts=1 cwd_b64=Lw== exit=0\n"
	mustAppend(t, e, events.MustNew(conv, &events.PtyPrompt{PromptTS: 1, Cwd: "/", SpoolOffset: int64(spool.Len()), Line: line}))
	spool.WriteString(line)
	mustAppend(t, e, events.MustNew(conv, &events.PtyOutput{SpoolOffset: int64(spool.Len()), Data: []byte("no block\n")}))
	spool.WriteString("no block\n")
	blk.Status = events.BlockCompleted
	zero := 0
	blk.ExitCode = &zero
	mustAppend(t, e, events.MustNew(conv, &events.PtyBlockEnd{Block: blk}))
	if got := readView(t, h, projections.PtySpoolView(conv)); !bytes.Equal(got, spool.Bytes()) {
		t.Fatalf("spool = %q, want %q", got, spool.Bytes())
	}
	if got := readView(t, h, projections.PtyBlockOutputView(conv, "blk_1")); !bytes.Equal(got, out.Bytes()) {
		t.Fatalf("block out = %q, want %q", got, out.Bytes())
	}
	blocks := readView(t, h, projections.PtyBlocksView(conv))
	if n := bytes.Count(blocks, []byte("\n")); n != 2 {
		t.Fatalf("blocks.jsonl has %d lines, want 2:\n%s", n, blocks)
	}
	evl := readView(t, h, projections.PtyEventsView(conv))
	if n := bytes.Count(evl, []byte("\n")); n != 9 {
		t.Fatalf("events.jsonl has %d lines, want 9:\n%s", n, evl)
	}
	if bytes.Contains(evl, []byte("binary")) {
		t.Fatalf("events.jsonl repeats output bytes:\n%s", evl)
	}
}

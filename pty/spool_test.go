package pty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
)

// diskSpool reads conv's output.spool.
func (b *bridge) diskSpool() []byte {
	b.t.Helper()
	dir, _ := b.home.PtyDir(b.conv)
	disk, err := os.ReadFile(filepath.Join(dir, "output.spool"))
	if err != nil {
		b.t.Fatal(err)
	}
	return disk
}

// TestSpoolServedFromFile: 3.4 MB of output through a block; the manager
// holds at most 2×TailBuffer of it in memory, and read_spool, wait_for
// (substring and regex, from before the tail and across its start),
// search and the block's output serve the exact bytes of the file.
func TestSpoolServedFromFile(t *testing.T) {
	b := newBridge(t)
	b.execWait("seq 1 500000")
	if n := b.mgr.TailLen(b.conv); n > 2*pty.TailBuffer || n < pty.TailBuffer {
		t.Fatalf("tail holds %d bytes, want [%d, %d]", n, pty.TailBuffer, 2*pty.TailBuffer)
	}
	final := b.checkLifecycles() // read_spool == output.spool, block output == blocks/<id>.out
	disk := b.diskSpool()
	if len(disk) < 3<<20 {
		t.Fatalf("spool %d bytes", len(disk))
	}
	tailStart := int64(len(disk) - b.mgr.TailLen(b.conv))
	for _, c := range []struct {
		match string
		from  int64
	}{
		{"\n12345\n", 0},
		{"\n350000\n", 0},
		{string(disk[tailStart-4 : tailStart+4]), tailStart - 100}, // across the tail's start
		{string(disk[tailStart-4 : tailStart+4]), 0},
		{"\n499999\n", 1000},
	} {
		w := b.post("wait_for", map[string]any{"match": c.match, "from_cursor": c.from, "timeout_ms": 2000})
		want := int64(bytes.Index(disk[c.from:], []byte(c.match))) + c.from
		if w["matched"] != true || num(w["match_cursor"]) != want || w["match_text"] != c.match || num(w["resume_cursor"]) != want+int64(len(c.match)) {
			t.Fatalf("wait_for %q from %d = %v, want match at %d", c.match, c.from, w, want)
		}
	}
	re := `\n(2468[0-9]{2})\n`
	w := b.post("wait_for", map[string]any{"match": re, "match_type": "regex", "from_cursor": 10, "timeout_ms": 2000})
	loc := regexp.MustCompile(re).FindIndex(disk[10:])
	if w["matched"] != true || num(w["match_cursor"]) != int64(loc[0]+10) || w["match_text"] != string(disk[loc[0]+10:loc[1]+10]) {
		t.Fatalf("regex wait = %v, want %v", w, loc)
	}
	// A wait from the end does not match old output.
	w = b.post("wait_for", map[string]any{"match": "\n12345\n", "timeout_ms": 100})
	if w["matched"] != false || num(w["resume_cursor"]) != int64(len(disk)) {
		t.Fatalf("wait from the end = %v", w)
	}
	s := b.get("search?q=424242")
	matches := s["matches"].([]any)
	if len(matches) != 1 {
		t.Fatalf("search: %v", s)
	}
	m := matches[0].(map[string]any)
	at := int64(bytes.Index(disk, []byte("424242")))
	var blockID string
	for id := range final {
		blockID = id
	}
	if m["line"] != "424242" || num(m["match_cursor"]) != at || num(m["line_cursor"]) != at || m["block_id"] != blockID {
		t.Fatalf("search hit %v, want at %d in %s", m, at, blockID)
	}
	// Block output read in the middle, from the file.
	out := b.get(fmt.Sprintf("blocks/%s/output?offset=%d&max_bytes=%d", blockID, 100000, 7))
	dir, _ := b.home.PtyDir(b.conv)
	blk, _ := os.ReadFile(filepath.Join(dir, "blocks", blockID+".out"))
	if out["data"] != string(blk[100000:100007]) || num(out["resume_cursor"]) != 100007 || num(out["size"]) != int64(len(blk)) {
		t.Fatalf("block output = %v, want %q", out, blk[100000:100007])
	}
}

// truncatedEvents returns the pty.truncated events of conv in the log.
func (b *bridge) truncatedEvents() []events.PtyTruncated {
	b.t.Helper()
	b.barrier()
	var out []events.PtyTruncated
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			b.t.Fatal(err)
		}
		if ev.Type == events.TypePtyTruncated && ev.Stream == b.conv {
			d, err := events.DecodeAs[*events.PtyTruncated](ev)
			if err != nil {
				b.t.Fatal(err)
			}
			out = append(out, *d)
		}
	}
	return out
}

// TestBlockOutputCap: a block printing past its cap keeps running and
// completes; the bytes past the cap are dropped and counted exactly
// (pty.truncated events, the END's dropped_bytes, status); the spool and
// the block's output show the markers; the next block is not capped by
// the previous one.
func TestBlockOutputCap(t *testing.T) {
	const capBytes = 100_000
	h, b := openCappedBridge(t, capBytes)
	// 1,000,000 x, "\n", "done\n": 1,000,006 bytes.
	blk := b.execWait(`head -c 1000000 /dev/zero | tr '\0' x; echo; echo done`)
	const produced, dropped = 1_000_006, 1_000_006 - capBytes
	if blk["status"] != "completed" || num(blk["dropped_bytes"]) != dropped {
		t.Fatalf("block %v, want completed with %d bytes dropped", blk, dropped)
	}
	tr := b.truncatedEvents()
	var sum int64
	for _, e := range tr {
		sum += e.Dropped
		if e.BlockID != blk["block_id"] || e.Scope != events.TruncatedBlock || e.Limit != capBytes {
			t.Fatalf("truncated event %+v", e)
		}
	}
	if len(tr) != 2 || sum != dropped {
		t.Fatalf("%d truncated events dropping %d bytes, want 2 and %d", len(tr), sum, dropped)
	}
	id := blk["block_id"].(string)
	out := b.get("blocks/" + id + "/output?max_bytes=4194304")["data"].(string)
	want := strings.Repeat("x", capBytes) + "\n" + tr[0].Line[1:] + tr[1].Line
	if out != want {
		t.Fatalf("block output: %d bytes ending %q, want %d ending %q", len(out), out[max(0, len(out)-200):], len(want), want[len(want)-200:])
	}
	if !strings.Contains(tr[0].Line, "truncated at the block cap of 100000 bytes") || !strings.Contains(tr[1].Line, fmt.Sprintf("%d bytes of output dropped", dropped)) {
		t.Fatalf("markers %q %q", tr[0].Line, tr[1].Line)
	}
	st := b.get("status")
	if num(st["block_output_cap"]) != capBytes || num(st["dropped_bytes"]) != dropped || num(st["conversation_output_cap"]) != pty.DefaultConversationOutputCap {
		t.Fatalf("status %v", st)
	}
	b.checkLifecycles()
	if after := b.execWait("echo after"); num(after["dropped_bytes"]) != 0 {
		t.Fatalf("next block %v", after)
	}
	if got := b.get("blocks/" + b.lastBlock() + "/output")["data"]; got != "after\n" {
		t.Fatalf("next block output %q", got)
	}
	_ = produced
	// The recording and a rebuild of the views from the log carry the
	// markers exactly where the spool has them.
	b.barrier()
	var cast bytes.Buffer
	if _, err := pty.WriteAsciicast(&cast, b.conv, b.eng.Log().Events(1)); err != nil {
		t.Fatal(err)
	}
	var o strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(cast.String()), "\n")[1:] {
		var rec []any
		json.Unmarshal([]byte(l), &rec)
		if rec[1] == "o" {
			o.WriteString(rec[2].(string))
		}
	}
	if o.String() != string(b.diskSpool()) {
		t.Fatalf("asciicast o data (%d bytes) != spool (%d bytes)", o.Len(), len(b.diskSpool()))
	}
	dst := home.Home{Dir: t.TempDir()}
	if _, err := projections.Rebuild(context.Background(), b.eng.Log().Events(1), dst, projections.RebuildOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{projections.PtySpoolView(b.conv), projections.PtyBlockOutputView(b.conv, id)} {
		live, _ := os.ReadFile(filepath.Join(h.Dir, v))
		re, _ := os.ReadFile(filepath.Join(dst.Dir, v))
		if !bytes.Equal(live, re) || len(live) == 0 {
			t.Fatalf("%s: live %d bytes, rebuilt %d", v, len(live), len(re))
		}
	}
}

// TestBlockOutputCapOneRead: an overflow that reaches the appender in the
// same batch as the crossing (one small write past the cap) still gets its
// closing marker with the total before the END, as a long flood does, so a
// reader sees the same two markers whatever the batching was.
func TestBlockOutputCapOneRead(t *testing.T) {
	const capBytes = 100
	_, b := openCappedBridge(t, capBytes)
	// 300 zeros and a newline in one write: 301 bytes, 201 past the cap.
	blk := b.execWait(`printf '%0300d\n' 0`)
	const dropped = 301 - capBytes
	if blk["status"] != "completed" || num(blk["dropped_bytes"]) != dropped {
		t.Fatalf("block %v, want completed with %d bytes dropped", blk, dropped)
	}
	tr := b.truncatedEvents()
	if len(tr) != 2 || tr[0].Dropped != dropped || tr[1].Dropped != 0 {
		t.Fatalf("truncated events %+v, want the crossing with %d dropped and a closing count with 0", tr, dropped)
	}
	if want := fmt.Sprintf("[cmlab: %d bytes of output dropped in all past the block cap]\n", dropped); tr[1].Line != want {
		t.Fatalf("closing marker %q, want %q", tr[1].Line, want)
	}
	out := b.get("blocks/" + blk["block_id"].(string) + "/output")["data"].(string)
	if want := strings.Repeat("0", capBytes) + tr[0].Line + tr[1].Line; out != want {
		t.Fatalf("block output %q, want %q", out, want)
	}
}

// openCappedBridge is a bridge over a new home whose blocks store at most
// capBytes of output each.
func openCappedBridge(t *testing.T, capBytes int64) (home.Home, *bridge) {
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	return h, openBridgeWith(t, h, eng, pty.Options{Dir: h.Dir, BlockOutputCap: capBytes})
}

// lastBlock is the id of the conversation's last block.
func (b *bridge) lastBlock() string {
	bl := b.get("blocks")["blocks"].([]any)
	return bl[len(bl)-1].(map[string]any)["block_id"].(string)
}

// TestConversationOutputCap: past the conversation's cap, output of every
// block is dropped (and counted); prompts still come, so blocks end.
func TestConversationOutputCap(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	const capBytes = 50_000
	b := openBridgeWith(t, h, eng, pty.Options{Dir: h.Dir, ConversationOutputCap: capBytes})
	blk := b.execWait(`head -c 100000 /dev/zero | tr '\0' y`)
	kept := capBytes - num(blk["spool_begin"]) // after the first prompt's line
	if blk["status"] != "completed" || num(blk["dropped_bytes"]) != 100000-kept {
		t.Fatalf("block %v, want %d dropped", blk, 100000-kept)
	}
	blk2 := b.execWait(`echo hello`)
	if blk2["status"] != "completed" || num(blk2["dropped_bytes"]) != 6 {
		t.Fatalf("second block %v", blk2)
	}
	tr := b.truncatedEvents()
	var sum int64
	for _, e := range tr {
		sum += e.Dropped
		if e.Scope != events.TruncatedConversation || e.Limit != capBytes {
			t.Fatalf("truncated event %+v", e)
		}
	}
	if sum != 100000-kept+6 {
		t.Fatalf("truncated events drop %d", sum)
	}
	if st := b.get("status"); num(st["dropped_bytes"]) != sum {
		t.Fatalf("status %v", st)
	}
	b.checkLifecycles()
}

// TestSpoolFileGone: with output.spool removed under the daemon, a read
// of bytes older than the tail is refused (DEGRADED, naming the file),
// never answered short or with other bytes; the tail still serves the
// newest output; nothing crashes.
func TestSpoolFileGone(t *testing.T) {
	b := newBridge(t)
	b.execWait("seq 1 500000")
	size := num(b.get("status")["resume_cursor"])
	dir, _ := b.home.PtyDir(b.conv)
	if err := os.Rename(filepath.Join(dir, "output.spool"), filepath.Join(dir, "moved.spool")); err != nil {
		t.Fatal(err)
	}
	code, r := b.call("POST", "/api/pty/conv1/read_spool", "", map[string]any{"from_cursor": 0})
	if code != 503 || !strings.Contains(fmt.Sprint(r), "output.spool") || !strings.Contains(fmt.Sprint(r), "DEGRADED") {
		t.Fatalf("read_spool of old bytes without the file = %d %v", code, r)
	}
	code, r = b.call("POST", "/api/pty/conv1/wait_for", "", map[string]any{"match": "\n77\n", "from_cursor": 0, "timeout_ms": 100})
	if code != 503 {
		t.Fatalf("wait_for over old bytes without the file = %d %v", code, r)
	}
	tail := b.post("read_spool", map[string]any{"from_cursor": size - 20})
	moved, _ := os.ReadFile(filepath.Join(dir, "moved.spool"))
	if num(tail["resume_cursor"]) != size || tail["data"] != string(moved[size-20:]) {
		t.Fatalf("read_spool of the tail = %v, want %q", tail, moved[size-20:])
	}
	os.Rename(filepath.Join(dir, "moved.spool"), filepath.Join(dir, "output.spool"))
}

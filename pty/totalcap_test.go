package pty_test

import (
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// TestTotalOutputCapAcrossConversations (issue 27 item 11): every
// conversation could store ConversationOutputCap (1 GiB, written three
// times: spool, block file, log) with no bound across conversations.
// With TotalOutputCap 64 KiB, three conversations printing 40 KiB each
// store at most 64 KiB of output in all; the one that crosses the cap gets
// a pty.truncated of scope "total" whose marker names the flag.
func TestTotalOutputCapAcrossConversations(t *testing.T) {
	const total = 64 << 10
	b := newBridgeOpts(t, pty.Options{TotalOutputCap: total, IdleTimeout: -1})
	for _, c := range []string{"a", "b", "c"} {
		b.conv = c
		b.execWait("head -c 40960 /dev/zero | tr '\\0' x; echo")
	}
	b.barrier()
	var stored int64
	var marks []*events.PtyTruncated
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case events.TypePtyOutput:
			p, _ := events.DecodeAs[*events.PtyOutput](ev)
			stored += int64(len(p.Data))
		case events.TypePtyTruncated:
			p, _ := events.DecodeAs[*events.PtyTruncated](ev)
			marks = append(marks, p)
		}
	}
	if stored > total {
		t.Fatalf("%d bytes of output stored across conversations, over the total cap of %d", stored, total)
	}
	if stored < total-8<<10 {
		t.Fatalf("%d bytes stored: the cap cut far too early (cap %d)", stored, total)
	}
	if len(marks) == 0 || marks[0].Scope != events.TruncatedTotal || marks[0].Limit != total || !strings.Contains(marks[0].Line, "--pty-total-cap") {
		t.Fatalf("truncation markers %+v; want the first of scope %q, limit %d, naming --pty-total-cap", marks, events.TruncatedTotal, total)
	}
}

package pty_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// TestAsciicast: the recording parses as asciicast v2, every record is
// valid UTF-8 even when a character was split between reads, and the "o"
// data concatenated equals the spool.
func TestAsciicast(t *testing.T) {
	b := newBridge(t)
	b.execWait(`echo hello`)
	// A euro sign split across two reads of the pty.
	b.execWait(`printf 'x\342'; sleep 0.3; printf '\202\254y\n'`)
	ir := b.post("exec_interactive", map[string]any{"cmd": guess(t)})
	b.post("wait_for", map[string]any{"match": "Guess a number", "from_cursor": ir["resume_cursor"], "timeout_ms": 20000})
	b.post("send", map[string]any{"data": "7\r"})
	b.post("wait_prompt", map[string]any{"from_cursor": ir["resume_cursor"], "timeout_ms": 20000})

	b.barrier()
	// The split really happened in the log: some pty.output ends mid-character.
	split := false
	for ev, err := range b.eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == events.TypePtyOutput {
			d, _ := events.DecodeAs[*events.PtyOutput](ev)
			if bytes.HasSuffix(d.Data, []byte("x\342")) {
				split = true
			}
		}
	}
	if !split {
		t.Fatal("no pty.output ends inside the euro sign; the test proves nothing")
	}
	var buf bytes.Buffer
	n, err := pty.WriteAsciicast(&buf, b.conv, b.eng.Log().Events(1))
	if err != nil || n == 0 {
		t.Fatalf("WriteAsciicast = %d, %v", n, err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	var hdr pty.AsciicastHeader
	if err := json.Unmarshal([]byte(lines[0]), &hdr); err != nil || hdr.Version != 2 || hdr.Width != 200 || hdr.Height != 50 || hdr.Timestamp == 0 {
		t.Fatalf("header %q: %+v %v", lines[0], hdr, err)
	}
	var out strings.Builder
	codes := map[string]int{}
	var lastT float64
	for _, l := range lines[1:] {
		if !utf8.ValidString(l) {
			t.Fatalf("record is not valid UTF-8: %q", l)
		}
		var rec []any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || len(rec) != 3 {
			t.Fatalf("record %q: %v", l, err)
		}
		tm, ok1 := rec[0].(float64)
		code, ok2 := rec[1].(string)
		data, ok3 := rec[2].(string)
		if !ok1 || !ok2 || !ok3 || tm < lastT {
			t.Fatalf("record %q", l)
		}
		lastT = tm
		if strings.ContainsRune(data, utf8.RuneError) {
			t.Fatalf("replacement character in %q", l)
		}
		codes[code]++
		if code == "o" {
			out.WriteString(data)
		}
	}
	if sp := b.spool(); out.String() != string(sp) {
		t.Fatalf("o data (%d bytes) != spool (%d bytes)\n%q\n%q", out.Len(), len(sp), out.String(), sp)
	}
	if codes["m"] != 3 || codes["i"] != 4 || codes["o"] < 4 {
		t.Fatalf("record counts %v", codes)
	}
	if !strings.Contains(out.String(), "x€y\n") {
		t.Fatalf("euro sign lost: %q", out.String())
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// TestReplayPtyAsciicast: 'cmlab replay pty' writes asciicast v2 from the
// log; a character split between two outputs stays valid UTF-8 and the "o"
// data concatenated is the spool.
func TestReplayPtyAsciicast(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	exit := 0
	line := "__FWS_PROMPT__ ts=1 cwd_b64=Lw== exit=0\n"
	blk := events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "echo €", Status: events.BlockRunning}
	evs := []events.Payload{
		&events.PtySessionStarted{ConversationID: "c1", ShellID: "sh_1", Cols: 120, Rows: 40},
		&events.PtyBlockBegin{Block: blk},
		&events.PtyInput{Data: []byte("eval $'echo €'\n"), BlockID: "blk_1", Source: "exec"},
		&events.PtyOutput{BlockID: "blk_1", SpoolOffset: 0, Data: []byte("x\xe2\x82")},
		&events.PtyOutput{BlockID: "blk_1", SpoolOffset: 3, Data: []byte("\xacy\n")},
		&events.PtyPrompt{PromptTS: 1, Cwd: "/", ExitCode: &exit, SpoolOffset: 6, Line: line, BlockID: "blk_1"},
	}
	for i, p := range evs {
		ev := events.MustNew("c1", p)
		ev.TS = int64(1_700_000_000_000 + 250*i)
		if _, err := eng.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "c1.cast")
	// The clean view (the default, issue 25): what the terminal looked
	// like — no sentinel line, no exec wrapper, the command as typed.
	if code, _, errs := cli(t, "replay", "pty", "c1", "--asciicast", out, "--home", h.Dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	clean, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	wantClean := `{"version":2,"width":120,"height":40,"timestamp":1700000000,"title":"cmlab pty c1"}
[0.250,"m","block 1: echo €"]
[0.250,"i","echo €\r"]
[0.250,"o","$ echo €\r\n"]
[0.750,"o","x"]
[1.000,"o","€y\r\n"]
`
	if string(clean) != wantClean {
		t.Fatalf("clean recording:\n%s\nwant:\n%s", clean, wantClean)
	}
	// --raw: the spool byte for byte.
	if code, _, errs := cli(t, "replay", "pty", "c1", "--asciicast", out, "--raw", "--home", h.Dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":2,"width":120,"height":40,"timestamp":1700000000,"title":"cmlab pty c1"}
[0.250,"m","block 1: echo €"]
[0.500,"i","eval $'echo €'\n"]
[0.750,"o","x"]
[1.000,"o","€y\n"]
[1.250,"o","__FWS_PROMPT__ ts=1 cwd_b64=Lw== exit=0\n"]
`
	if string(raw) != want {
		t.Fatalf("recording:\n%s\nwant:\n%s", raw, want)
	}
	var o strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n")[1:] {
		var rec []any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec[1] == "o" {
			o.WriteString(rec[2].(string))
		}
	}
	if o.String() != "x€y\n"+line {
		t.Fatalf("o data %q", o.String())
	}
	// Unknown conversation: an error, no file.
	if code, _, _ := cli(t, "replay", "pty", "nope", "--asciicast", out+"2", "--home", h.Dir); code == 0 {
		t.Fatal("replay of an unknown conversation succeeded")
	}
	if _, err := os.Stat(out + "2"); err == nil {
		t.Fatal("file written for an unknown conversation")
	}
}

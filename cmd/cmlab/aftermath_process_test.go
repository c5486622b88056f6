package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// TestCrashAftermathProcess: status and the recover dry run list the
// terminal blocks a crash left open; recover --apply ends them and they are
// gone from both.
func TestCrashAftermathProcess(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	begin := events.MustNew("conv1", &events.PtyBlockBegin{Block: events.Block{BlockID: "blk_1", Seq: 1, Mode: "block", Cmd: "sleep 100", Cwd: "/", Status: "running", OutputPath: "pty/conv1/blocks/blk_1.out"}})
	if _, err := eng.Append(context.Background(), begin); err != nil {
		t.Fatal(err)
	}
	eng.Close() // as a crash leaves it: no END
	lines := "terminal:    1 block(s) left open by a crash; 'cmlab recover --apply' (or the next 'cmlab serve') ends them as failed (daemon_crashed):\n" +
		"             conv1 blk_1 \"sleep 100\"\n"
	code, out, errs := cliRun(t, nil, "status", "--home", h.Dir)
	if code != 0 || !strings.HasSuffix(out, lines) || errs != "" {
		t.Fatalf("status = %d\n%s%s", code, out, errs)
	}
	code, out, _ = cliRun(t, nil, "status", "--home", h.Dir, "--json")
	var rep struct {
		LeftOpen []struct {
			Conv  string       `json:"conversation_id"`
			Block events.Block `json:"block"`
		} `json:"terminalLeftOpen"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.LeftOpen) != 1 || rep.LeftOpen[0].Conv != "conv1" || rep.LeftOpen[0].Block.Cmd != "sleep 100" {
		t.Fatalf("status --json = %d %s", code, out)
	}
	if code, out, errs := cliRun(t, nil, "recover", "--home", h.Dir); code != 0 || !strings.HasSuffix(out, lines) {
		t.Fatalf("recover = %d\n%s%s", code, out, errs)
	}
	if code, out, errs := cliRun(t, nil, "recover", "--apply", "--home", h.Dir); code != 0 || !strings.Contains(out, "blk_1") {
		t.Fatalf("recover --apply = %d\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{{"status"}, {"recover"}} {
		if code, out, _ := cliRun(t, nil, append(args, "--home", h.Dir)...); code != 0 || strings.Contains(out, "terminal:") {
			t.Fatalf("%v after apply = %d\n%s", args, code, out)
		}
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// recDamagedHome writes 60 events over several small segments and flips
// one byte in the middle of the first segment (not a torn tail). It
// returns the home and the damaged segment's name.
func recDamagedHome(t *testing.T) (home.Home, string) {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		ev := events.MustNew("recovery", &events.RecoveryApplied{Decisions: []events.RecoveryDecision{{Action: "none", Reason: strings.Repeat("x", 100) + string(rune('a'+i%26))}}})
		if _, err := eng.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, e := range ents {
		if len(e.Name()) == 20 && strings.Trim(e.Name(), "0123456789") == "" {
			segs = append(segs, e.Name())
		}
	}
	sort.Strings(segs)
	if len(segs) < 3 {
		t.Fatalf("only %d segments", len(segs))
	}
	p := filepath.Join(h.WALDir(), segs[0])
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xFF
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return h, segs[0]
}

func TestRecoverCorruptionExit3(t *testing.T) {
	h, seg := recDamagedHome(t)
	code, out, errOut := recCLI(t, "recover", "--home", h.Dir)
	if code != exitCorrupt || !strings.Contains(errOut, seg) || !strings.Contains(errOut, "--salvage --apply") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

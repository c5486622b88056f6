package main

import (
	"context"
	"encoding/json"
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
	code, out, errOut := cli(t, "recover", "--home", h.Dir)
	if code != exitCorrupt || !strings.Contains(errOut, "segment "+seg+" offset") || !strings.Contains(errOut, "seq 5") ||
		!strings.Contains(errOut, "1 damaged place(s)") || !strings.Contains(errOut, "--salvage --apply") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestRecoverSalvage: --salvage --apply keeps every other event, lists the
// lost seq, leaves the damaged bytes in quarantine/ and a placeholder at
// the lost seq; the log opens again.
func TestRecoverSalvage(t *testing.T) {
	h, _ := recDamagedHome(t)
	code, out, errOut := cli(t, "recover", "--salvage", "--apply", "--json", "--home", h.Dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var plan struct {
		Salvaged []struct {
			Seq   uint64 `json:"seq"`
			Where string `json:"where"`
		} `json:"salvaged"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Salvaged) != 1 || plan.Salvaged[0].Seq != 5 || !strings.Contains(plan.Salvaged[0].Where, "quarantine/") {
		t.Fatalf("salvaged %+v (%v)\n%s", plan.Salvaged, err, out)
	}
	q, err := os.ReadDir(h.QuarantineDir())
	if err != nil || len(q) == 0 {
		t.Fatalf("quarantine: %v %v", q, err)
	}
	var qbytes int
	for _, e := range q {
		b, _ := os.ReadFile(filepath.Join(h.QuarantineDir(), e.Name()))
		qbytes += len(b)
	}
	if qbytes == 0 {
		t.Fatal("quarantined bytes are empty")
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := 0
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case ev.Seq == 5:
			p, err := events.DecodeAs[*events.WalSalvaged](ev)
			if err != nil || p.LostSeq != 5 {
				t.Fatalf("seq 5 = %s %+v %v", ev.Type, p, err)
			}
		case ev.Type != events.TypeRecoveryApplied:
			t.Fatalf("seq %d is %s", ev.Seq, ev.Type)
		default:
			p, err := events.DecodeAs[*events.RecoveryApplied](ev)
			if err != nil || p.Decisions[0].Reason != strings.Repeat("x", 100)+string(rune('a'+(ev.Seq-1)%26)) {
				t.Fatalf("seq %d altered: %+v %v", ev.Seq, p, err)
			}
		}
	}
	if n != 60 {
		t.Fatalf("%d events after salvage, want 60", n)
	}
	eng.Close()
	if code, _, errOut := cli(t, "recover", "--home", h.Dir); code != 0 {
		t.Fatalf("recover after salvage: exit %d %s", code, errOut)
	}
}

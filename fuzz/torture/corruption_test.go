package torture

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
)

// TestCorruptionSampled is the CI form of the corruption campaign: a
// random sample of the byte flips and truncation points of the last two
// segments of a generated log. CMLAB_CORRUPTION_FULL=1 tries every one.
func TestCorruptionSampled(t *testing.T) {
	sample := 120
	if os.Getenv("CMLAB_CORRUPTION_FULL") != "" {
		sample = 0
	}
	seed := uint64(20260206)
	if s := os.Getenv("CMLAB_CORRUPTION_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	var out bytes.Buffer
	sum, err := RunCorruption(context.Background(), CorruptionOptions{Dir: t.TempDir(), Sample: sample, Seed: seed, Out: &out})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Flips == 0 || sum.FlipsDetected != sum.Flips {
		t.Fatalf("flips tried %d, detected %d", sum.Flips, sum.FlipsDetected)
	}
	if sum.FlipsRefused == 0 || sum.Salvaged == 0 {
		t.Fatalf("the sample never hit mid-log damage: refused %d, salvaged %d", sum.FlipsRefused, sum.Salvaged)
	}
	if sum.Cuts == 0 || sum.CutsDetected != sum.Cuts || sum.CutsInPlaceRefused != sum.CutsInPlace {
		t.Fatalf("cuts %d detected %d; in place %d refused %d", sum.Cuts, sum.CutsDetected, sum.CutsInPlace, sum.CutsInPlaceRefused)
	}
}

package torture

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildCmlab builds the cmlab binary once per test binary run into dir.
func buildCmlab(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cmlab")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/cmlab/cmlab/cmd/cmlab")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmlab: %v\n%s", err, out)
	}
	return bin
}

// TestTortureRounds is the CI form of the crash loop: five short rounds of
// mixed load, SIGKILL, restart and the full invariant check.
func TestTortureRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and crash-loops a daemon")
	}
	bin := buildCmlab(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Options{
		Binary: bin, Rounds: 5, Seed: 20260206, Dir: t.TempDir(), Out: &out,
		Workers: 3, MinLoad: 200 * time.Millisecond, MaxLoad: 900 * time.Millisecond,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("torture: %v", err)
	}
	if len(sum.Rounds) != 5 {
		t.Fatalf("ran %d rounds, want 5", len(sum.Rounds))
	}
	acked := 0
	for _, r := range sum.Rounds {
		acked += r.Feedback + r.Imports + r.Submits
	}
	if acked == 0 {
		t.Fatal("no write was acknowledged in five rounds: the load did not run")
	}
	if !strings.Contains(out.String(), "seed 20260206: 5 rounds, 0 violations") {
		t.Fatalf("summary line missing:\n%s", out.String())
	}
	if sum.Home != "" {
		if _, err := os.Stat(sum.Home); err == nil {
			t.Fatalf("home %s kept without violations or --keep", sum.Home)
		}
	}
}

// TestTortureCompactRounds runs the crash loop with a compaction after
// every kill (Options.Compact): every check then runs on a log whose
// front lies in the archive.
func TestTortureCompactRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and crash-loops a daemon")
	}
	bin := buildCmlab(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Options{
		Binary: bin, Rounds: 3, Seed: 20261125, Dir: t.TempDir(), Out: &out, Compact: true,
		Workers: 3, MinLoad: 300 * time.Millisecond, MaxLoad: 900 * time.Millisecond,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("torture: %v", err)
	}
	if len(sum.Rounds) != 3 || sum.Archived == 0 {
		t.Fatalf("%d rounds archived %d segments, want 3 rounds and some segments", len(sum.Rounds), sum.Archived)
	}
	if !strings.Contains(out.String(), "seed 20261125: 3 rounds, 0 violations") {
		t.Fatalf("summary line missing:\n%s", out.String())
	}
}

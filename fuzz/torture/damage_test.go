package torture

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/shiptest"
)

// TestDamageKindsCovered: the fixture of the damage matrix holds a file of
// every kind home.Kinds lists (or the kind is named n/a with a reason), and
// every file it holds, in its home, archive and variant homes, is of a
// listed kind. A new kind of file joins the
// matrix by being listed in home.Kinds; a file of no kind fails here.
func TestDamageKindsCovered(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmlab and a fixture home")
	}
	bin := buildCmlab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fx, err := buildFixture(ctx, bin, filepath.Join(t.TempDir(), "fx"), 40, shiptest.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range home.Kinds {
		if _, na := naKind(k, true); !na && !fx.made[k.Name] {
			t.Errorf("kind %s (%s, made by %q): the fixture holds no file of it and it is not listed n/a", k.Name, k.Pattern, k.Made)
		}
	}
	var unlisted []string
	type root struct{ name, dir string }
	roots := []root{{home.RootHome, fx.home}, {home.RootArchive, fx.archive}}
	for _, v := range fx.variants {
		roots = append(roots, root{home.RootHome, filepath.Join(fx.root, v)})
	}
	for _, root := range roots {
		filepath.Walk(root.dir, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root.dir, p)
			rel = filepath.ToSlash(rel)
			if home.KindOf(root.name, rel) == "" {
				unlisted = append(unlisted, root.name+":"+rel)
			}
			return nil
		})
	}
	if len(unlisted) > 0 {
		sort.Strings(unlisted)
		t.Fatalf("files of no kind in home.Kinds (list them there so the damage matrix covers them):\n%s", strings.Join(unlisted, "\n"))
	}
}

// knownOpen are matrix violations owned by other branches of issue 27 (the
// lead merges them; then the entry goes): case prefix → finding. A
// violation of a listed case is logged, not failed; every other one fails.
var knownOpen = map[string]string{
	// Empty: cmlab torture --damage --seed 1 reports 0 violations (the
	// archive-dir, archive-segment, segment/foreign, segment/truncate and
	// segment/symlink-wal/status rows were closed by the archive check at
	// open, wal/archive_open.go, and the acknowledged tail, wal/acked.go).
}

func knownFor(c DamageCase) string {
	for prefix, why := range knownOpen {
		if strings.HasPrefix(c.String(), prefix) {
			return why
		}
	}
	return ""
}

// TestDamageMatrixSampled is the CI form of `cmlab torture --damage`: a
// seeded sample of the matrix (CMLAB_DAMAGE_SAMPLE cases, default 20;
// CMLAB_DAMAGE_SEED, default a fixed one), bounded to fit CI's time on a
// loaded 2-core machine. Any violation fails the test, except those of
// knownOpen, which are logged.
func TestDamageMatrixSampled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmlab and runs a sample of the damage matrix")
	}
	sample, seed := 20, uint64(20261128)
	if n, err := strconv.Atoi(os.Getenv("CMLAB_DAMAGE_SAMPLE")); err == nil {
		sample = n
	}
	if s, err := strconv.ParseUint(os.Getenv("CMLAB_DAMAGE_SEED"), 10, 64); err == nil {
		seed = s
	}
	bin := buildCmlab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	sum, err := RunDamage(ctx, DamageOptions{Binary: bin, Sample: sample, Seed: seed, Out: &out, Posts: 60, NATS: shiptest.NATS(t),
		// Cases that cannot run are not worth a slot of the sample.
		Filter: func(c DamageCase) bool {
			k := kindByName(c.Kind)
			_, naK := naKind(k, true)
			_, naC := naCommand(c.Command, k, true)
			return !naK && !naC && (c.Damage != "stale-daemon" || c.Kind == "daemon-info")
		}})
	t.Log("\n" + out.String())
	if sum != nil && sum.Dir != "" {
		defer os.RemoveAll(sum.Dir)
	}
	if err != nil && err != ErrViolations {
		t.Fatal(err)
	}
	if sum.Cases == 0 {
		t.Fatal("no case ran")
	}
	for _, r := range sum.Results {
		if len(r.Violations) == 0 {
			continue
		}
		if why := knownFor(r.DamageCase); why != "" {
			t.Logf("known open (%s): %s: %s", why, r.DamageCase, strings.Join(r.Violations, "; "))
			continue
		}
		t.Errorf("%s (%s): exit %d: %s\n%s", r.DamageCase, r.File, r.Exit, strings.Join(r.Violations, "; "), r.Output)
	}
}

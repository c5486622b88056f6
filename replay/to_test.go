package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// TestToEqualsLiveHomeStoppedAfterN replays random workloads to several
// N and compares every view with a live home that only ever saw the first N
// events: byte-identical, same set of files, and a log copy holding exactly
// the source's first N entries. Workloads: this package's (with an extra
// test projector fed by the engine's observer hook), and the projections
// package's mixed-Lab and every-type generators.
func TestToEqualsLiveHomeStoppedAfterN(t *testing.T) {
	const total = 150
	workloads := []struct {
		name  string
		evs   []*events.Event
		extra ProjectorFactory
		proj  ProjectorFactory
	}{
		{"replay", workload(t, 7, total), lineFactory(0, 0), withLines},
		{"mixed-lab", slices.Collect(projections.Workload(projections.WorkloadMixedLab, 5, total)), nil, nil},
		{"every-type", slices.Collect(projections.Workload(projections.WorkloadEveryType, 3, total)), nil, nil},
	}
	for _, wl := range workloads {
		t.Run(wl.name, func(t *testing.T) {
			testToAgainstLive(t, wl.evs, wl.extra, wl.proj)
		})
	}
}

func testToAgainstLive(t *testing.T, evs []*events.Event, extra, proj ProjectorFactory) {
	ctx := context.Background()
	total := len(evs)
	tmp := t.TempDir()
	full := liveHome(t, filepath.Join(tmp, "full"), evs, extra)
	// One segment holds the whole test log: the copy of the first N entries
	// must be a byte prefix of it.
	srcSeg, err := os.ReadFile(filepath.Join(full.WALDir(), fmt.Sprintf("%020d", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 17, 64, 99, total} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			live := liveHome(t, filepath.Join(tmp, fmt.Sprintf("live%d", n)), evs[:n], extra)
			into := home.Home{Dir: filepath.Join(tmp, fmt.Sprintf("replay%d", n))}
			res, err := To(ctx, ToOptions{Src: full, Into: into, UpTo: uint64(n), Projector: proj})
			if err != nil {
				t.Fatal(err)
			}
			if res.Last != uint64(n) || res.Events != n {
				t.Fatalf("replayed to %d (%d events), want %d", res.Last, res.Events, n)
			}
			want, got := snapshot(t, live), snapshot(t, into)
			if len(want) == 0 {
				t.Fatal("live home has no views")
			}
			if len(got) != len(want) {
				t.Fatalf("replayed home has files %v, live has %v", keys(got), keys(want))
			}
			for f, w := range want {
				if got[f] != w {
					t.Errorf("%s differs: replayed %d bytes, live %d bytes", f, len(got[f]), len(w))
				}
			}
			copySeg, err := os.ReadFile(filepath.Join(into.WALDir(), fmt.Sprintf("%020d", 1)))
			if err != nil {
				t.Fatal(err)
			}
			if len(copySeg) == 0 || !bytes.HasPrefix(srcSeg, copySeg) || (n == total) != (len(copySeg) == len(srcSeg)) {
				t.Fatalf("log copy (%d bytes) is not the source's first %d entries (source %d bytes)", len(copySeg), n, len(srcSeg))
			}
			copyLog, err := OpenLog(into.WALDir())
			if err != nil {
				t.Fatal(err)
			}
			if last, err := copyLog.LastSeq(ctx); err != nil || last != uint64(n) {
				t.Fatalf("log copy ends at seq %d (%v), want %d", last, err, n)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestToUntilTime(t *testing.T) {
	ctx := context.Background()
	evs := workload(t, 3, 40)
	tmp := t.TempDir()
	src := liveHome(t, filepath.Join(tmp, "src"), evs, nil)
	// Event i (1-based) has ts base+(i-1)s: until the ts of event 25 keeps 25.
	until := time.UnixMilli(evs[24].TS).Add(500 * time.Millisecond)
	res, err := To(ctx, ToOptions{Src: src, Into: home.Home{Dir: filepath.Join(tmp, "out")}, Until: until, Projector: withLines})
	if err != nil {
		t.Fatal(err)
	}
	if res.Last != 25 || res.LastTS != evs[24].TS {
		t.Fatalf("until %v stopped at seq %d ts %d, want 25", until, res.Last, res.LastTS)
	}
}

func TestToRefusesBadTargets(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	src := liveHome(t, filepath.Join(tmp, "src"), workload(t, 1, 5), nil)
	busy := filepath.Join(tmp, "busy")
	if err := os.MkdirAll(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, "x"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := To(ctx, ToOptions{Src: src, Into: home.Home{Dir: busy}, UpTo: 3}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("non-empty target: err %v, want ErrNotEmpty", err)
	}
	if b, _ := os.ReadFile(filepath.Join(busy, "x")); string(b) != "keep" {
		t.Fatal("non-empty target was modified")
	}
	_, err := To(ctx, ToOptions{Src: src, Into: home.Home{Dir: filepath.Join(tmp, "past")}, UpTo: 9})
	if err == nil {
		t.Fatal("--to past the end of the log succeeded")
	}
	if _, serr := os.Stat(filepath.Join(tmp, "past")); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("--to past the end created the target (%v)", serr)
	}
	_, err = To(ctx, ToOptions{Src: src, Into: home.Home{Dir: filepath.Join(tmp, "early")}, Until: time.UnixMilli(1)})
	if !errors.Is(err, ErrNothing) {
		t.Fatalf("--until before the first event: %v, want ErrNothing", err)
	}
	if _, serr := os.Stat(filepath.Join(tmp, "early")); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("--until before the log created the target (%v)", serr)
	}
	if _, err := To(ctx, ToOptions{Src: home.Home{Dir: filepath.Join(tmp, "nolog")}, Into: home.Home{Dir: filepath.Join(tmp, "o")}, UpTo: 1}); !errors.Is(err, ErrNoLog) {
		t.Fatalf("missing log: err %v, want ErrNoLog", err)
	}
}

package labapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/faultfs"
	"github.com/cmlab/cmlab/internal/linktest"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// storedHome is a home of a mixed history whose Lab store a clean stop
// wrote whole.
func storedHome(t *testing.T) home.Home {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	writeLog(t, h, mixedLab(11, 1500))
	srv, eng := openServer(t, h, nil)
	srv.Close()
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitStoreSettled waits for the check after open and any rebuild.
func waitStoreSettled(t *testing.T, st *labStore) {
	t.Helper()
	select {
	case <-st.verified:
	case <-time.After(60 * time.Second):
		t.Fatal("the check after open never ended")
	}
	st.rebuildWG.Wait()
}

// editStore rewrites meta values of the store at path with bbolt.
func editStore(t *testing.T, path string, edit func(meta *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return edit(tx.Bucket(lsMeta)) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// TestLabStoreDamaged: a store damaged in any way — cut short, bytes
// flipped in its meta pages or in a record, not a bbolt file, empty, of
// another format, covering events the log does not hold — is rebuilt from
// the log (at open, or by the check after open), logged, and answers
// exactly as the heap model of the log does.
func TestLabStoreDamaged(t *testing.T) {
	flipIn := func(needle string) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			i := bytes.Index(b, []byte(needle))
			if i < 0 {
				t.Fatalf("%q not in the store", needle)
			}
			b[i+len(needle)-1] ^= 0x01
			os.WriteFile(path, b, 0o600)
		}
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, path string)
		at     string // the warning logged
	}{
		{"record bytes flipped", flipIn("/data/out/77"), "Lab store damaged"},
		{"experiment bytes flipped", flipIn("exp_"), "Lab store damaged"},
		{"cut short", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()/2)
		}, "Lab store rebuilt"},
		{"meta pages zeroed", func(t *testing.T, path string) {
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt(make([]byte, 2*os.Getpagesize()), 0)
			f.Close()
		}, "Lab store rebuilt"},
		{"not bbolt", func(t *testing.T, path string) { os.WriteFile(path, []byte("hello\n"), 0o600) }, "Lab store rebuilt"},
		{"empty", func(t *testing.T, path string) { os.WriteFile(path, nil, 0o600) }, "Lab store rebuilt"},
		{"another format", func(t *testing.T, path string) {
			editStore(t, path, func(meta *bolt.Bucket) error { return lsPut(meta, lsKeyFormat, []byte("cmlab-labstore-0")) })
		}, "Lab store rebuilt"},
		{"past the log", func(t *testing.T, path string) {
			editStore(t, path, func(meta *bolt.Bucket) error {
				v, _ := lsGet(meta, lsKeyCovered)
				return lsPut(meta, lsKeyCovered, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(v)+1000))
			})
		}, "Lab store rebuilt"},
		{"another event", func(t *testing.T, path string) {
			editStore(t, path, func(meta *bolt.Bucket) error {
				return lsPut(meta, lsKeyCoveredID, []byte("01a20000-0000-7000-8000-000000000000"))
			})
		}, "Lab store rebuilt"},
		{"counters fail their CRC", func(t *testing.T, path string) {
			editStore(t, path, func(meta *bolt.Bucket) error { return meta.Put(lsKeyCounters, make([]byte, 36)) })
		}, "Lab store rebuilt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := storedHome(t)
			c.damage(t, LabStoreFile(h))
			var logs bytes.Buffer
			srv, eng := openServer(t, h, &logs)
			defer eng.Close()
			defer srv.Close()
			waitStoreSettled(t, srv.lab)
			if !strings.Contains(logs.String(), c.at) {
				t.Fatalf("no %q logged: %s", c.at, logs.String())
			}
			sameLabState(t, srv, fullReplay(t, eng))
			if srv.lab.Rebuilt() == "" {
				t.Fatal("Rebuilt says nothing")
			}
			if err := checkLabStore(srv.lab.db); err != nil {
				t.Fatalf("the rebuilt store fails its check: %v", err)
			}
			if _, err := os.Stat(LabStoreFile(h) + ".rebuild"); err == nil {
				t.Fatal("the rebuild's file is left beside the store")
			}
		})
	}
}

// Environment of TestHelperLabStoreCrash, the child of TestLabStoreSIGKILL.
const (
	envCrashHome  = "CMLAB_TEST_LABSTORE_HOME"
	envCrashPhase = "CMLAB_TEST_LABSTORE_PHASE"
)

// TestHelperLabStoreCrash is the child of TestLabStoreSIGKILL: it opens
// the Lab store of a home whose log the parent wrote (built from the log
// in batches of 200 events), then feeds it more events appended to the
// log and flushes, then rebuilds it in place; at the phase the parent
// names it writes a marker file and blocks until the parent kills it.
func TestHelperLabStoreCrash(t *testing.T) {
	dir := os.Getenv(envCrashHome)
	if dir == "" {
		t.Skip("child process of TestLabStoreSIGKILL")
	}
	h := home.Home{Dir: dir}
	phase := os.Getenv(envCrashPhase)
	hook := func(p string) {
		if p == phase {
			os.WriteFile(filepath.Join(dir, "in-phase"), []byte(p), 0o600)
			select {} // killed here
		}
	}
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := openLabStore(context.Background(), labStoreOptions{path: LabStoreFile(h), log: l, hook: hook, batch: 200})
	if err != nil {
		t.Fatal(err)
	}
	appendObserved(t, l, st, 99, 400)
	st.flush()
	st.rebuildLive("crash test")
	fmt.Fprintln(os.Stderr, "phase never reached:", phase)
	os.Exit(3)
}

// TestLabStoreSIGKILL: a process killed (SIGKILL, a real child) at every
// phase of a write of the Lab store — the empty file made, between
// catch-up batches (the log read into the next batch meanwhile), the
// whole log written but not yet synced, before and after a flush's transaction, a rebuild's
// file whole but not renamed, renamed but not swapped in — leaves a home
// whose next start answers exactly as the heap model of the log, with the
// store covering the whole log and no rebuild file left.
func TestLabStoreSIGKILL(t *testing.T) {
	for _, phase := range []string{labPhaseCreated, labPhaseCatchUp, labPhaseCaughtUp, labPhaseFlushWrite, labPhaseFlushed,
		labPhaseRebuildBuilt, labPhaseRebuildRenamed} {
		t.Run(phase, func(t *testing.T) {
			h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
			writeLog(t, h, mixedLab(5, 1200))
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLabStoreCrash$", "-test.v=false")
			cmd.Env = append(os.Environ(), envCrashHome+"="+h.Dir, envCrashPhase+"="+phase)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			marker := filepath.Join(h.Dir, "in-phase")
			deadline := time.Now().Add(90 * time.Second)
			for {
				if _, err := os.Stat(marker); err == nil {
					break
				}
				select {
				case err := <-exited:
					t.Fatalf("the child exited (%v) before phase %s: %s", err, phase, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					<-exited
					t.Fatalf("the child never reached phase %s: %s", phase, stderr.String())
				}
				time.Sleep(2 * time.Millisecond)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			os.Remove(marker)
			if strings.HasPrefix(phase, "rebuild-") {
				_, err := os.Stat(LabStoreFile(h) + ".rebuild")
				if (err == nil) != (phase == labPhaseRebuildBuilt) {
					t.Fatalf("phase %s: rebuild file present: %v", phase, err == nil)
				}
			}
			var logs bytes.Buffer
			srv, eng := openServer(t, h, &logs)
			defer eng.Close()
			defer srv.Close()
			waitStoreSettled(t, srv.lab)
			sameLabState(t, srv, fullReplay(t, eng))
			if c := srv.lab.Covered(); c != eng.Log().LastSeq() {
				t.Fatalf("store covers %d, the log ends at %d", c, eng.Log().LastSeq())
			}
			if _, err := os.Stat(LabStoreFile(h) + ".rebuild"); err == nil {
				t.Fatal("the rebuild's file is left after a restart")
			}
		})
	}
}

// runsOnly is n run imports, newest last.
func runsOnly(n int) func(yield func(*events.Event) bool) {
	return func(yield func(*events.Event) bool) {
		for i := range n {
			sync := i % 101
			ev := events.MustNew("lab_h", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: fmt.Sprintf("run_h_%06d", i),
				SessionID: "lab_h", CreatedAt: fmt.Sprintf("2026-01-%02dT%02d:%02d:%02d.000Z", 1+i/86400, i/3600%24, i/60%60, i%60),
				Topic: fmt.Sprintf("topic %06d", i), ArtifactsDir: fmt.Sprintf("/runs/%d", i), ArtifactsDirRealpath: fmt.Sprintf("/runs/%d", i),
				VideoPath: fmt.Sprintf("/runs/%d/video.mp4", i), AutoMetricsSummary: &events.AutoMetricsSummary{SyncRating: &sync}}})
			ev.TS = 1767225600000 + int64(i)
			if !yield(ev) {
				return
			}
		}
	}
}

// heapAfterPages opens a home of n runs, reads GET /api/runs pages (the
// first, one after a cursor deep in the list, the last) and a run, and
// returns the live heap then (after a GC) and at open.
func heapAfterPages(t *testing.T, n int) (afterOpen, afterPages uint64) {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), fmt.Sprintf("home-%d", n))}
	writeLog(t, h, runsOnly(n))
	srv, eng := openServer(t, h, nil)
	defer eng.Close()
	defer srv.Close()
	waitStoreSettled(t, srv.lab)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	afterOpen = heap()
	var page struct {
		Items      []struct{ RunID string }
		NextCursor *string
		Total      int
	}
	code, body := get(t, srv, "/api/runs?limit=50")
	jsonUnmarshal(t, body, &page)
	if code != 200 || page.Total != n || len(page.Items) != 50 || page.Items[0].RunID != fmt.Sprintf("run_h_%06d", n-1) {
		t.Fatalf("first page: %d total %d, %d items, first %+v", code, page.Total, len(page.Items), page.Items[:1])
	}
	code, body = get(t, srv, fmt.Sprintf("/api/runs?limit=50&after=run_h_%06d", n/2))
	jsonUnmarshal(t, body, &page)
	if code != 200 || len(page.Items) != 50 || page.Items[0].RunID != fmt.Sprintf("run_h_%06d", n/2-1) {
		t.Fatalf("middle page: %d, %d items", code, len(page.Items))
	}
	code, body = get(t, srv, "/api/runs?limit=50&after=run_h_000050")
	jsonUnmarshal(t, body, &page)
	if code != 200 || len(page.Items) != 50 || page.NextCursor != nil || page.Items[49].RunID != "run_h_000000" {
		t.Fatalf("last page: %d, %d items, next %v", code, len(page.Items), page.NextCursor)
	}
	if code, body = get(t, srv, fmt.Sprintf("/api/runs/run_h_%06d", n/3)); code != 200 {
		t.Fatalf("GET run: %d %s", code, body)
	}
	return afterOpen, heap()
}

// TestLabStoreHeapFlat: a home of 100,000 runs starts and answers GET
// /api/runs pages with the live heap of a home of 1,000 runs (within
// 4 MiB; the heap model held about 50 MiB more).
func TestLabStoreHeapFlat(t *testing.T) {
	small0, small1 := heapAfterPages(t, 1_000)
	big0, big1 := heapAfterPages(t, 100_000)
	t.Logf("live heap: 1,000 runs %.1f/%.1f MiB, 100,000 runs %.1f/%.1f MiB (at open/after pages)",
		float64(small0)/(1<<20), float64(small1)/(1<<20), float64(big0)/(1<<20), float64(big1)/(1<<20))
	const slack = 4 << 20
	if big0 > small0+slack || big1 > small1+slack {
		t.Fatalf("the heap grows with the runs: 1,000 runs %d/%d bytes, 100,000 runs %d/%d", small0, small1, big0, big1)
	}
}

// TestLabStoreBuiltWithLargeMap: a store created for a long log (its
// whole size mapped at once, createLabStore) is built, checked and
// reopened like any other.
func TestLabStoreBuiltWithLargeMap(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	writeLog(t, h, mixedLab(3, 600))
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	db, err := createLabStore(LabStoreFile(h), labMmapMax/labMmapPerEvent)
	if err != nil {
		t.Fatal(err)
	}
	st := &labStore{log: l, batch: 100}
	var covered uint64
	if err := st.file().CatchUp(context.Background(), db, 1, l.LastSeq(), func(seq uint64, _ string) { covered = seq }); err != nil {
		t.Fatal(err)
	}
	if err := checkLabStore(db); err != nil {
		t.Fatalf("the store fails its check: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if covered != l.LastSeq() {
		t.Fatalf("caught up to %d, the log ends at %d", covered, l.LastSeq())
	}
	if c, err := LabStoreCovers(h); err != nil || c != covered {
		t.Fatalf("reopened: covers %d, %v (want %d)", c, err, covered)
	}
}

// TestLabStoreRebuildKeepsDirSyncError: a live rebuild whose rename
// lands but whose directory fsync fails swaps the new file in and keeps
// the failure as the store's flush error (said in a warning), until a
// flush succeeds; the rebuilt store answers as before. The failure used
// to be cleared with the old file's flush error in the same step.
func TestLabStoreRebuildKeepsDirSyncError(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	errDisk := errors.New("injected: directory fsync failed")
	path := LabStoreFile(h)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	fs := faultfs.New(func(stage, p string) error {
		if stage == faultfs.StageDirSync && p == path {
			return errDisk
		}
		return nil
	})
	var warned []string
	st, err := openLabStore(context.Background(), labStoreOptions{path: path, log: l, fs: fs,
		warn: func(msg string, args ...any) { warned = append(warned, fmt.Sprint(append([]any{msg}, args...)...)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seqs := appendObserved(t, l, st, 5, 200)
	if err := st.flush(); err != nil {
		t.Fatal(err)
	}
	if err := st.rebuildLive("test"); err != nil {
		t.Fatalf("rebuildLive: %v", err)
	}
	if st.Rebuilt() != "test" {
		t.Fatalf("Rebuilt() = %q, want the new file swapped in", st.Rebuilt())
	}
	if err := st.flush(); !errors.Is(err, errDisk) {
		t.Fatalf("flush after the rebuild = %v, want the directory fsync failure", err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "rename may not survive a crash") || !strings.Contains(warned[0], errDisk.Error()) {
		t.Fatalf("warnings %q", warned)
	}
	if st.DurableCovered() != seqs[len(seqs)-1] {
		t.Fatalf("covered %d, want %d", st.DurableCovered(), seqs[len(seqs)-1])
	}
}

// appendObserved appends n events of the mixed Lab workload (seed) to l
// and has st observe them, as the engine's observer would; it returns
// their seqs.
func appendObserved(t *testing.T, l *wal.Log, st *labStore, seed uint64, n int) []uint64 {
	t.Helper()
	var evs []*events.Event
	for ev := range projections.Workload(projections.WorkloadMixedLab, seed, n) {
		evs = append(evs, ev)
	}
	seqs, err := l.Append(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		ev.Seq = seqs[i]
		st.Observe(ev)
	}
	return seqs
}

// TestLinkedLabStoreNeverWrittenThrough: state/labstore.db replaced by a
// link to a copy elsewhere was opened through the link and written by
// bbolt (the damage matrix's labstore/symlink-elsewhere). The link is
// replaced by a rebuilt store; its target keeps every byte.
func TestLinkedLabStoreNeverWrittenThrough(t *testing.T) {
	h := storedHome(t)
	v := linktest.MoveAway(t, LabStoreFile(h))
	var logs bytes.Buffer
	srv, eng := openServer(t, h, &logs)
	waitStoreSettled(t, srv.lab)
	if !strings.Contains(logs.String(), "Lab store rebuilt") {
		t.Errorf("no rebuild logged: %s", logs.String())
	}
	sameLabState(t, srv, fullReplay(t, eng))
	srv.Close()
	eng.Close()
	v.Unchanged(t)
	linktest.Regular(t, LabStoreFile(h))
}

// TestLabStoreTrimDuringRebuildSwap: a long list trims the store's
// mapped pages (trim) while a rebuild swaps its new file in. The trim
// held the file's read lock and then waited for the store's lock, which
// the rebuild held while it waited for the file's write lock: both
// waited for good, and every later read of the store with them.
func TestLabStoreTrimDuringRebuildSwap(t *testing.T) {
	h, l := emptyLabHome(t)
	var st *labStore
	hook := func(phase string) {
		if phase != labPhaseRebuildRenamed {
			return
		}
		// The rebuild holds the store's lock here: a trim starts, and the
		// swap goes on once the trim has its read lock or is done.
		trimmed := make(chan struct{})
		go func() { st.trim(); close(trimmed) }()
		for {
			select {
			case <-trimmed:
				return
			default:
			}
			if !st.dbMu.TryLock() {
				return // the trim holds the read lock
			}
			st.dbMu.Unlock()
			runtime.Gosched()
		}
	}
	st, err := openLabStore(context.Background(), labStoreOptions{path: LabStoreFile(h), log: l, hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	appendObserved(t, l, st, 3, 50)
	rebuilt := make(chan error, 1)
	go func() { rebuilt <- st.rebuildLive("test") }()
	select {
	case err := <-rebuilt:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the rebuild's swap and a trim wait for each other")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// emptyLabHome is a new home with its state directory and its log open
// (closed at the test's end).
func emptyLabHome(t *testing.T) (home.Home, *wal.Log) {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	if err := os.MkdirAll(h.StateDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return h, l
}

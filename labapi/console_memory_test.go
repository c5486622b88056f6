package labapi

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestConsolePagesDoNotGrowMemory: serving hundreds of console pages (log
// pages with and without filters, traces, overviews) leaves the server's
// live heap where a few pages left it: no per-page state is kept.
func TestConsolePagesDoNotGrowMemory(t *testing.T) {
	tl := newTestLab(t)
	for i := 0; i < 300; i++ {
		if r := tl.do("POST", "/api/feedback", `{"notes":"memory"}`); r.status != 200 {
			t.Fatal(r.status, string(r.body))
		}
	}
	pages := []string{"/api/console/log", "/api/console/log?type=feedback.&before=200", "/api/console/log?id=nothing",
		"/api/console/trace?id=lab_test", "/api/console/overview", "/api/console/recovery"}
	serve := func(n int) {
		for i := 0; i < n; i++ {
			for _, p := range pages {
				if r := tl.do("GET", p, ""); r.status != 200 {
					t.Fatalf("%s: %d %s", p, r.status, r.body)
				}
			}
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	serve(20)
	before := heap()
	serve(200)
	after := heap()
	t.Logf("live heap after 120 pages %d KiB, after 1320 more %d KiB", before>>10, after>>10)
	if after > before+2<<20 {
		t.Fatalf("the live heap grew by %d KiB over 1200 pages", (after-before)>>10)
	}
}

// liveHeap is the live heap after two collections.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestConsoleEveryPageBoundedMemory: every kind of console page — log
// pages (filtered, traced, jumped), the overview, the recovery plan, a
// block's screen and frames, recordings and streamed playbacks of a block
// and of the whole conversation, time-travel points built, read and
// compared, the drift check — served over and over leaves the daemon's
// live heap (runtime.ReadMemStats) where the first rounds left it: what
// the console keeps (sessions, sizes, frame offsets, three travel points)
// is bounded, nothing grows with the pages served.
func TestConsoleEveryPageBoundedMemory(t *testing.T) {
	tl := newSizedPtyLab(t, 100, 30)
	for i := 0; i < 200; i++ {
		if r := tl.do("POST", "/api/feedback", fmt.Sprintf(`{"notes":"memory %d"}`, i)); r.status != 200 {
			t.Fatal(r.status, string(r.body))
		}
	}
	blk := tl.execWait("mem", "for i in $(seq 1 200); do echo \"\\033[3$((i%8))mline $i\\033[0m\"; done")
	tl.execWait("mem", "echo second")
	last := tl.lastSeq()
	get := func(p string) []byte {
		r := tl.do("GET", p, "")
		if r.status != 200 {
			t.Fatalf("%s: %d %s", p, r.status, r.body)
		}
		return r.body
	}
	pages := []string{"/api/console/log", "/api/console/log?type=feedback.&before=150", "/api/console/log?id=nothing",
		fmt.Sprintf("/api/console/log?seq=%d", last/2), "/api/console/log?conv=mem", "/api/console/log?at=" + fmt.Sprint(time.Now().UnixMilli()-1000),
		"/api/console/trace?id=lab_test", "/api/console/overview", "/api/console/recovery", "/api/console/pty",
		"/api/console/pty/mem/blocks/" + blk + "/screen", "/api/console/pty/mem/blocks/" + blk + "/frames",
		"/api/console/pty/mem/recording", "/api/console/pty/mem/recording?t=0", "/api/console/pty/mem/recording?block=" + blk,
		"/api/console/pty/mem/playback?speed=16", "/api/console/pty/mem/playback?block=" + blk + "&speed=16"}
	travel := func(seq uint64) string {
		r := tl.do("POST", "/api/console/travel", fmt.Sprintf(`{"seq":%d}`, seq))
		if r.status != 200 {
			t.Fatalf("travel: %d %s", r.status, r.body)
		}
		id, _ := r.json(t)["id"].(string)
		return id
	}
	serve := func(rounds int) {
		for i := 0; i < rounds; i++ {
			for _, p := range pages {
				get(p)
			}
			a, b := travel(last/3+uint64(i%5)), travel(last)
			get("/api/console/travel/" + a + "/file?path=feedback/feedback.jsonl")
			get("/api/console/travel/compare?a=" + a + "&b=" + b)
			if r := tl.do("POST", "/api/console/check", "{}"); r.status != 200 {
				t.Fatalf("check: %d %s", r.status, r.body)
			}
		}
	}
	serve(5)
	before := liveHeap()
	serve(40)
	after := liveHeap()
	t.Logf("live heap after 5 rounds %d KiB, after 40 more (%d pages) %d KiB", before>>10, 40*(len(pages)+5), after>>10)
	if after > before+2<<20 {
		t.Fatalf("the live heap grew by %d KiB over %d pages", (after-before)>>10, 40*(len(pages)+5))
	}
}
